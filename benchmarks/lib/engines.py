"""One engine per load generator (pure, no Django): what a run of that tool is made of.

An ``Engine`` answers, for a run's :class:`~benchmarks.lib.run_options.RunOptions`: its blocking
``problems`` (each naming its form field), its ``warnings`` before a launch, its ``run_args`` (the
argument list, built once), its ``env`` (the password and TLS mode through libpq's variables,
never argv), and which ``recorder`` reads its output (the services' recorder of that name stores
what the tool says). ``ENGINES`` holds them by name: adding a third tool is one module with such
an engine, registered here, plus its form fields. ``for_target`` makes the options whole for where
the run connects (sysbench's prepared statements through a pool), at launch and again when it
executes (the pool's mode then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from benchmarks.lib import pgbench_command, run_problems, run_warnings, sysbench_command
from benchmarks.lib.run_options import ConnectionTarget, RunOptions
from panel.core.errors import N_, Message


@dataclass(frozen=True)
class LaunchContext:
    """What the advice before a launch knows of the target (None: not known)."""

    scale: int | None = None  # the data set's (pgbench)
    target_max_connections: int | None = None
    pool_mode: str | None = None  # None: directly to the server
    pool_size: int | None = None
    pgbouncer_version: str | None = None


class Engine(Protocol):
    """A load generator the panel can run."""

    name: str
    #: Percentiles from the tool's own transaction log (pgbench -l); otherwise from its lines.
    logs_transactions: bool
    #: The services' recorder that reads this tool's output ("pgbench" or "sysbench").
    recorder: str

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions: ...

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]: ...

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]: ...

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]: ...

    def env(
        self,
        password: str | None,
        sslmode: str | None,
        *,
        base: Mapping[str, str],
        application_name: str | None,
    ) -> dict[str, str]: ...


class _Libpq:
    """Both tools reach PostgreSQL through libpq: the same environment."""

    def env(
        self,
        password: str | None,
        sslmode: str | None,
        *,
        base: Mapping[str, str],
        application_name: str | None,
    ) -> dict[str, str]:
        return pgbench_command.build_env(password, sslmode, base=base, application_name=application_name)


class Pgbench(_Libpq):
    name = sysbench_command.PGBENCH
    logs_transactions = True
    recorder = "pgbench"

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions:
        return options  # the user's query mode; the warnings say when a pool will refuse it

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]:
        return run_problems.problems(options)

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]:
        return run_warnings.warnings(
            options,
            scale=context.scale,
            target_max_connections=context.target_max_connections,
            pool_mode=context.pool_mode,
            pgbouncer_version=context.pgbouncer_version,
            pool_size=context.pool_size,
        )

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
        return pgbench_command.build_run_args(program, target, options)


class Sysbench(_Libpq):
    name = sysbench_command.SYSBENCH
    logs_transactions = False  # its percentiles come from its own lines and histogram
    recorder = "sysbench"

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions:
        # Prepared statements off through transaction and statement pools (PgBouncer 1.18).
        return replace(options, query_mode=sysbench_command.ps_mode_for(pool_mode))

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]:
        return sysbench_command.problems(options)

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]:
        return sysbench_command.warnings(
            options, target_max_connections=context.target_max_connections, pool_mode=context.pool_mode
        )

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
        return sysbench_command.build_run_args(program, target, options)


ENGINES: dict[str, Engine] = {engine.name: engine for engine in (Pgbench(), Sysbench())}


def engine_for(name: str) -> Engine | None:
    return ENGINES.get(name)


def problems(options: RunOptions) -> list[tuple[str, Message]]:
    """Blocking errors of a run by its engine's rules; an unknown engine is one of them."""
    engine = engine_for(options.engine)
    if engine is not None:
        return engine.problems(options)
    return [
        *run_problems.problems(options),
        (
            "engine",
            Message(
                N_("Unknown engine %(e)s: choose pgbench or sysbench."),
                "run.engine_unknown",
                e=repr(options.engine),
            ),
        ),
    ]
