"""What a benchmark run or initialisation is (pure, no Django): the options every engine shares.

``RunOptions`` and ``InitOptions`` carry the choices of the form, the ``bench`` command and the API;
``run_options`` is the one way to make them from a user's choices (threads default to the CPUs).
A run's options cross into a row and back through ``RunOptions.to_json`` / ``from_json``. Whether
they are sound is each engine's ``problems`` (:mod:`benchmarks.lib.engines`); the advice before a
launch is :mod:`benchmarks.lib.run_warnings`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks.lib.pgbench_output import ProgressShape
from benchmarks.lib.pgbench_txlog import TxLogFormat

BUILTIN_SCRIPTS = ("tpcb-like", "simple-update", "select-only")
# Built-in scripts that wrap their statements in BEGIN ... END.
TRANSACTIONAL_BUILTINS = frozenset({"tpcb-like", "simple-update"})
QUERY_MODES = ("simple", "extended", "prepared")
INIT_STEP_LETTERS = "dtgGvpf"
POOL_MODES = ("session", "transaction", "statement")
PASSWORD_PLACEHOLDER = "********"
SECRET_ENV_KEYS = frozenset({"PGPASSWORD"})
MAX_CLIENTS = 10_000
MAX_DURATION_S = 86_400
MAX_TRANSACTIONS = 1_000_000_000
MAX_PROGRESS_S = 3_600
MAX_SCALE = 100_000
PGBOUNCER_PREPARED_SINCE = (1, 21)


@dataclass(frozen=True)
class ConnectionTarget:
    """Where pgbench connects: the server itself, or a PgBouncer pool (``dbname`` = pool name)."""

    host: str
    port: int
    user: str
    dbname: str
    sslmode: str = "require"


@dataclass(frozen=True)
class RunOptions:
    """One benchmark run. Exactly one of ``duration_s`` (-T) and ``transactions`` (-t, per client);
    at most one of ``builtin`` and ``custom_script_path`` (neither: the ``tpcb-like`` built-in)."""

    clients: int
    threads: int
    duration_s: int | None = None
    transactions: int | None = None
    progress_interval_s: int = 1
    builtin: str | None = None
    custom_script_path: str | None = None
    query_mode: str = "simple"
    rate: float | None = None  # --rate, transactions per second in total
    latency_limit_ms: float | None = None
    connect_per_transaction: bool = False  # -C
    max_tries: int | None = None  # None: pgbench's default of 1; 0: unlimited
    failures_detailed: bool = False
    log_transactions: bool = False  # -l
    log_prefix: str | None = None
    sampling_rate: float | None = None
    aggregate_interval_s: int | None = None
    report_per_command: bool = False  # -r
    no_vacuum: bool | None = None  # None: skip the vacuum for custom scripts only
    # The engine's name (benchmarks.lib.engines); tables × rows for engines whose data set has them.
    engine: str = "pgbench"
    tables: int | None = None
    table_size: int | None = None
    # The values of the engine's own fields (``Engine.extra_fields``), as (name, value) pairs.
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def extra_values(self) -> dict[str, Any]:
        return dict(self.extra)

    @property
    def script(self) -> str:
        """The built-in name, or ``custom``."""
        if self.custom_script_path is not None:
            return "custom"
        return self.builtin or "tpcb-like"

    @property
    def script_uses_transactions(self) -> bool | None:
        """Whether the script has BEGIN ... END; None for a custom script (unknown)."""
        if self.custom_script_path is not None:
            return None
        return self.script in TRANSACTIONAL_BUILTINS

    @property
    def skips_vacuum(self) -> bool:
        if self.no_vacuum is not None:
            return self.no_vacuum
        return self.custom_script_path is not None

    @property
    def progress_shape(self) -> ProgressShape:
        """What this run's progress lines carry (see :class:`ProgressShape`)."""
        return ProgressShape(
            lag=self.rate is not None,
            skipped=self.rate is not None and self.latency_limit_ms is not None,
            retries=self.max_tries is not None and self.max_tries != 1,
        )

    @property
    def txlog_format(self) -> TxLogFormat:
        return TxLogFormat.for_options(self.rate, self.max_tries)

    # What is decided where the run executes (its work directory), never stored with the run.
    EXECUTION_KEYS = (
        "custom_script_path",
        "log_transactions",
        "log_prefix",
        "sampling_rate",
        "aggregate_interval_s",
    )

    def to_json(self) -> dict[str, Any]:
        """The options as a row stores them (``BenchmarkRun.options``, a sweep's base options):
        every field but what only the execution decides (``EXECUTION_KEYS``)."""
        data = dataclasses.asdict(self)
        for key in self.EXECUTION_KEYS:
            data.pop(key, None)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunOptions:
        """The options of a stored row; keys this version does not know (a newer row) are left out."""
        known = {field.name for field in dataclasses.fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        if "extra" in values:  # JSON keeps the pairs as lists
            values["extra"] = tuple((str(name), value) for name, value in values["extra"])
        return cls(**values)


@dataclass(frozen=True)
class InitOptions:
    """``pgbench -i``. ``init_steps`` None keeps pgbench's default (``dtgvp``)."""

    scale: int
    init_steps: str | None = None
    foreign_keys: bool = False
    unlogged_tables: bool = False


def default_threads(clients: int, cpu_count: int | None) -> int:
    """One thread per CPU, never more than clients; prefer a count that divides the clients evenly."""
    cap = max(1, min(clients, cpu_count or 1))
    for threads in range(cap, 0, -1):
        if clients % threads == 0:
            return threads if threads * 2 >= cap else cap
    return cap


def run_options(
    *,
    clients: int,
    threads: int | None = None,
    duration_s: int | None = None,
    transactions: int | None = None,
    progress_interval_s: int = 1,
    builtin: str | None = "tpcb-like",
    query_mode: str = "simple",
    rate: float | None = None,
    latency_limit_ms: float | None = None,
    connect_per_transaction: bool = False,
    max_tries: int | None = None,
    cpu_count: int | None = None,
    engine: str = "pgbench",
    tables: int | None = None,
    table_size: int | None = None,
    extra: tuple[tuple[str, Any], ...] = (),
) -> RunOptions:
    """A run as a user chose it (the form, ``bench run``): no threads given means one per CPU.

    ``builtin`` None is a custom script (its path is set when the run executes). An engine with
    a rule of its own for threads applies it on top (``engines.make_options``).
    """
    return RunOptions(
        clients=clients,
        threads=threads or default_threads(clients, cpu_count if cpu_count is not None else os.cpu_count()),
        duration_s=duration_s,
        transactions=transactions,
        progress_interval_s=progress_interval_s,
        builtin=builtin,
        query_mode=query_mode,
        rate=rate,
        latency_limit_ms=latency_limit_ms,
        connect_per_transaction=connect_per_transaction,
        max_tries=max_tries,
        engine=engine,
        tables=tables,
        table_size=table_size,
        extra=extra,
    )
