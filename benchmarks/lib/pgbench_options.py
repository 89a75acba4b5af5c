"""What a pgbench run or initialisation is, and whether it is sound (pure, no Django).

``RunOptions`` and ``InitOptions`` carry the choices of the form, the ``bench`` command and the API;
``run_options`` is the one way to make them from a user's choices (threads default to the CPUs).
``problems`` are the blocking errors, each naming the field of the form (and option of ``bench``)
it is about, so the form, the command and the services refuse with the same words; ``warnings`` are
the advice shown before a launch, never blocking.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

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
    # "sysbench": the same run by sysbench (see benchmarks.lib.sysbench_command), on the tables
    # its data set holds.
    engine: str = "pgbench"
    tables: int | None = None
    table_size: int | None = None

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


def problems(options: RunOptions) -> list[tuple[str, str]]:
    """Blocking errors as ``(field, sentence)``; empty when pgbench will accept the options.

    ``field`` is the run form's field (and ``bench run``'s option) the error is about.
    """
    found: list[tuple[str, str]] = []
    if not 1 <= options.clients <= MAX_CLIENTS:
        found.append(("clients", f"Clients must be between 1 and {MAX_CLIENTS:,}."))
    if options.threads < 1:
        found.append(("threads", "Threads must be at least 1."))
    elif options.threads > options.clients >= 1:
        found.append(("threads", f"Threads ({options.threads}) cannot exceed clients ({options.clients})."))
    if options.duration_s is None and options.transactions is None:
        found.append(("duration", "Give a duration or a number of transactions per client."))
    elif options.duration_s is not None and options.transactions is not None:
        found.append(("duration", "Give a duration or a number of transactions per client, not both."))
    if options.duration_s is not None and not 1 <= options.duration_s <= MAX_DURATION_S:
        found.append(("duration", f"Duration must be between 1 and {MAX_DURATION_S:,} seconds."))
    if options.transactions is not None and not 1 <= options.transactions <= MAX_TRANSACTIONS:
        found.append(("transactions", f"Transactions per client must be between 1 and {MAX_TRANSACTIONS:,}."))
    if not 1 <= options.progress_interval_s <= MAX_PROGRESS_S:
        found.append(("progress", f"Progress interval must be between 1 and {MAX_PROGRESS_S:,} seconds."))
    if options.builtin is not None and options.custom_script_path is not None:
        found.append(("script", "Choose a built-in script or a custom script, not both."))
    elif options.builtin is not None and options.builtin not in BUILTIN_SCRIPTS:
        found.append(
            (
                "script",
                f"Unknown built-in script {options.builtin!r}: choose one of {', '.join(BUILTIN_SCRIPTS)}.",
            )
        )
    if options.custom_script_path is not None and not options.custom_script_path.strip():
        found.append(("script", "The custom script path is empty."))
    if options.query_mode not in QUERY_MODES:
        found.append(
            (
                "query_mode",
                f"Unknown query mode {options.query_mode!r}: choose one of {', '.join(QUERY_MODES)}.",
            )
        )
    if options.rate is not None and not options.rate > 0:
        found.append(("rate", "Rate must be greater than 0 transactions per second."))
    if options.latency_limit_ms is not None and not options.latency_limit_ms > 0:
        found.append(("latency_limit", "Latency limit must be greater than 0 ms."))
    if options.max_tries is not None:
        if options.max_tries < 0:
            found.append(("max_tries", "Maximum tries must be 0 (unlimited) or more."))
        elif options.max_tries == 0 and options.latency_limit_ms is None and options.duration_s is None:
            found.append(("max_tries", "Unlimited tries need a latency limit or a duration."))
    found += [("log", error) for error in _log_errors(options)]
    return found


def validate(options: RunOptions) -> list[str]:
    """The sentences of ``problems``: what the command line prints."""
    return [message for _field, message in problems(options)]


def _log_errors(options: RunOptions) -> list[str]:
    errors: list[str] = []
    logging_options = (options.log_prefix, options.sampling_rate, options.aggregate_interval_s)
    if not options.log_transactions and any(value is not None for value in logging_options):
        errors.append("Log prefix, sampling rate and aggregate interval need the transaction log (-l).")
    if options.sampling_rate is not None and not 0 < options.sampling_rate <= 1:
        errors.append("Sampling rate must be greater than 0 and at most 1.")
    if options.sampling_rate is not None and options.aggregate_interval_s is not None:
        errors.append("Sampling and aggregation cannot be used together.")
    interval = options.aggregate_interval_s
    if interval is not None:
        if interval < 1:
            errors.append("Aggregate interval must be at least 1 second.")
        elif options.duration_s is not None and (
            interval > options.duration_s or options.duration_s % interval
        ):
            errors.append("The duration must be a multiple of the aggregate interval.")
    return errors


def validate_init(options: InitOptions) -> list[str]:
    """Blocking errors for ``pgbench -i``."""
    errors: list[str] = []
    if not 1 <= options.scale <= MAX_SCALE:
        errors.append(f"Scale must be between 1 and {MAX_SCALE:,}.")
    steps = options.init_steps
    if steps is not None:
        unknown = sorted({letter for letter in steps if letter not in INIT_STEP_LETTERS})
        if not steps:
            errors.append("Give at least one initialization step.")
        elif unknown:
            errors.append(
                f"Unknown initialization step {', '.join(map(repr, unknown))}: "
                f"allowed steps are {', '.join(INIT_STEP_LETTERS)}."
            )
        elif len(set(steps)) != len(steps):
            errors.append("Each initialization step may appear only once.")
        elif "g" in steps and "G" in steps:
            errors.append("Generate data client-side (g) or server-side (G), not both.")
    return errors


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
) -> RunOptions:
    """A run as a user chose it (the form, ``bench run``): no threads given means one per CPU.

    ``builtin`` None is a custom script (its path is set when the run executes). sysbench drives
    each client from a thread of its own: its threads are its clients.
    """
    if engine == "sysbench":
        threads = clients
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
    )


def _parse_version(version: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    if version is None or isinstance(version, tuple):
        return version
    numbers = re.findall(r"\d+", version)
    return tuple(int(number) for number in numbers[:3]) or None


def warnings(
    options: RunOptions,
    scale: int | None = None,
    target_max_connections: int | None = None,
    pool_mode: str | None = None,
    pgbouncer_version: str | tuple[int, ...] | None = None,
    script_uses_transactions: bool | None = None,
    *,
    pool_size: int | None = None,
) -> list[str]:
    """Non-blocking warnings about a run that will work badly; ``pool_mode`` None means direct."""
    found: list[str] = []
    clients = options.clients
    uses_transactions = (
        options.script_uses_transactions if script_uses_transactions is None else script_uses_transactions
    )
    if scale is not None and clients > scale and options.script == "tpcb-like":
        found.append(
            f"{clients} clients on a scale of {scale}: every TPC-B-like transaction updates one of "
            f"{scale} branch rows, so clients mostly wait for each other's row locks. "
            f"Initialise with a scale of at least {clients} to measure the server rather than lock contention."
        )
    if target_max_connections is not None and clients > target_max_connections:
        if pool_mode is None:
            found.append(
                f"{clients} clients but the server accepts at most {target_max_connections} connections "
                "for this user: pgbench will not start (connections refused). Use a connection pool or fewer clients."
            )
        else:
            found.append(
                f"{clients} clients but PgBouncer accepts at most {target_max_connections} client connections: "
                "the extra clients will be refused."
            )
    if pool_mode == "statement" and uses_transactions:
        found.append(
            f"Statement pools reject transaction blocks, and the {options.script} script uses BEGIN ... END: "
            "every client will abort ('transaction blocks not allowed in statement pooling mode'). "
            "Use select-only, a script without transactions, or a transaction pool."
        )
    if pool_mode == "session" and pool_size is not None and clients > pool_size:
        found.append(
            f"In session mode each client keeps a server connection for its whole session: "
            f"{clients - pool_size} of {clients} clients will wait for one of the {pool_size} and may be "
            "dropped (query_wait_timeout). Use a transaction pool to share connections."
        )
    version = _parse_version(pgbouncer_version)
    if (
        options.query_mode == "prepared"
        and pool_mode in ("transaction", "statement")
        and (version is None or version < PGBOUNCER_PREPARED_SINCE)
    ):
        shown = f"PgBouncer {'.'.join(map(str, version))}" if version else "PgBouncer before 1.21"
        found.append(
            f"{shown} does not track prepared statements in {pool_mode} pools: clients will fail with "
            "'prepared statement \"P_0\" does not exist'. Use the simple or extended query mode."
        )
    if options.threads > 1 and clients % options.threads:
        found.append(
            f"{clients} clients do not divide evenly among {options.threads} threads: "
            "some threads will drive more clients than others."
        )
    if options.duration_s is not None and options.progress_interval_s > options.duration_s:
        found.append("The progress interval is longer than the run: no progress will be reported.")
    return found
