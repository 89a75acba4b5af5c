"""One engine per load generator (pure, no Django): what a run of that tool is made of.

An ``Engine`` answers, for a run's :class:`~benchmarks.lib.run_options.RunOptions`: its blocking
``problems`` (each naming its form field), its ``warnings`` before a launch, its ``run_args`` (the
argument list, built once), its ``env`` (the password and TLS mode through libpq's variables,
never argv), and which ``recorder`` reads its output (the services' recorder of that name stores
what the tool says). ``ENGINES`` holds them by name: adding a third tool is one module with such
an engine, registered here, plus its form fields. ``for_target`` makes the options whole for where
the run connects (sysbench's prepared statements through a pool), at launch and again when it
executes (the pool's mode then).

Data sets go the same way: ``dataset_spec`` makes a data set's fields whole (defaults, the other
tools' fields cleared) with its problems, ``init_args`` builds its initialisation, ``init_recorder``
names the services' reader of its progress, and ``wants_dataset``/``with_dataset`` take a run's
shape from the database's data set of that engine (sysbench's tables × rows). ``program`` is the
tool's executable (``server_bindir``: the one of the cluster's PostgreSQL version when installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from benchmarks.lib import pgbench_command, run_problems, run_warnings, sysbench_command
from benchmarks.lib.run_options import ConnectionTarget, InitOptions, RunOptions, default_threads
from panel.core.errors import N_, Message


@dataclass(frozen=True)
class DatasetSpec:
    """What a data set is made of, as its row stores it (None: not this engine's)."""

    scale: int | None = None  # pgbench
    init_steps: str | None = None
    foreign_keys: bool = False
    tables: int | None = None  # sysbench
    table_size: int | None = None


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
    #: The executable's name; ``server_bindir``: the one of the cluster's version when installed.
    program: str
    server_bindir: bool
    #: The services' reader of a data set's initialisation progress ("pgbench" or "sysbench").
    init_recorder: str

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]: ...

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]: ...

    def wants_dataset(self, options: RunOptions) -> bool: ...

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions: ...

    def missing_dataset(self, database: str) -> Message: ...

    #: Sample fields beyond the shared ones (sysbench's queries per second).
    extra_sample_fields: tuple[str, ...]

    def custom_script_refusal(self) -> Message | None: ...

    def threads_for(self, clients: int, cpus: int | None) -> int: ...

    #: The built-in script a run gets when none is chosen.
    default_script: str

    def shape(self, spec: DatasetSpec) -> str: ...

    def short_shape(self, spec: DatasetSpec) -> str: ...

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
    program = "pgbench"
    server_bindir = True
    init_recorder = "pgbench"

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]:
        spec = replace(spec, init_steps=spec.init_steps or None, tables=None, table_size=None)
        if spec.scale is None:
            return spec, [("scale", Message(N_("Give a scale factor."), "dataset.scale_missing"))]
        return spec, run_problems.init_problems(self._init_options(spec))

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]:
        return pgbench_command.build_init_args(program, target, self._init_options(spec))

    @staticmethod
    def _init_options(spec: DatasetSpec) -> InitOptions:
        return InitOptions(spec.scale, spec.init_steps or None, spec.foreign_keys)  # type: ignore[arg-type]

    def wants_dataset(self, options: RunOptions) -> bool:
        return False  # pgbench's tables are what its scale says; the warnings tell a mismatch

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions:
        return options

    def missing_dataset(self, database: str) -> Message:
        raise NotImplementedError  # never asked: wants_dataset is False

    extra_sample_fields: tuple[str, ...] = ()

    def custom_script_refusal(self) -> Message | None:
        return None

    def threads_for(self, clients: int, cpus: int | None) -> int:
        return default_threads(clients, cpus)

    default_script = "tpcb-like"

    def shape(self, spec: DatasetSpec) -> str:
        return f"at scale {spec.scale}"

    def short_shape(self, spec: DatasetSpec) -> str:
        return f"scale {spec.scale}"

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
    program = "sysbench"
    server_bindir = False
    init_recorder = "sysbench"

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]:
        spec = DatasetSpec(
            tables=spec.tables or sysbench_command.DEFAULT_TABLES,
            table_size=spec.table_size or sysbench_command.DEFAULT_TABLE_SIZE,
        )
        return spec, sysbench_command.prepare_problems(spec.tables or 0, spec.table_size or 0)

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]:
        return sysbench_command.build_prepare_args(
            program, target, int(spec.tables or 0), int(spec.table_size or 0)
        )

    def wants_dataset(self, options: RunOptions) -> bool:
        return options.tables is None or options.table_size is None

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions:
        return replace(
            options,
            tables=options.tables or dataset.tables,
            table_size=options.table_size or dataset.table_size,
        )

    def missing_dataset(self, database: str) -> Message:
        return Message(
            N_(
                "No sysbench data set in the database “%(db)s”: prepare one first (Data sets, engine "
                "sysbench), pgbench's tables are not sysbench's."
            ),
            "run.sysbench_data_missing",
            db=database,
        )

    extra_sample_fields: tuple[str, ...] = ("qps",)

    def custom_script_refusal(self) -> Message | None:
        return Message(
            N_("sysbench runs its built-in OLTP scripts only; custom scripts are pgbench's."),
            "run.sysbench_custom_script",
        )

    def threads_for(self, clients: int, cpus: int | None) -> int:
        return clients  # sysbench drives each client from a thread of its own

    default_script = "oltp_read_write"

    def shape(self, spec: DatasetSpec) -> str:
        return f"sysbench {spec.tables} × {spec.table_size:,} rows"

    def short_shape(self, spec: DatasetSpec) -> str:
        return self.shape(spec)

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
