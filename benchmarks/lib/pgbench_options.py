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
from panel.core.errors import N_, Count, Message

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


def problems(options: RunOptions) -> list[tuple[str, Message]]:
    """Blocking errors as ``(field, sentence)``; empty when pgbench will accept the options.

    ``field`` is the run form's field (and ``bench run``'s option) the error is about; the sentence
    is a Message, put into words in the reader's language when shown.
    """
    found: list[tuple[str, Message]] = []
    if not 1 <= options.clients <= MAX_CLIENTS:
        found.append(
            (
                "clients",
                Message(
                    N_("Clients must be between 1 and %(max)s."), "run.clients_range", max=Count(MAX_CLIENTS)
                ),
            )
        )
    if options.threads < 1:
        found.append(("threads", Message(N_("Threads must be at least 1."), "run.threads_range")))
    elif options.threads > options.clients >= 1:
        found.append(
            (
                "threads",
                Message(
                    N_("Threads (%(threads)s) cannot exceed clients (%(clients)s)."),
                    "run.threads_over_clients",
                    threads=options.threads,
                    clients=options.clients,
                ),
            )
        )
    if options.duration_s is None and options.transactions is None:
        found.append(
            (
                "duration",
                Message(N_("Give a duration or a number of transactions per client."), "run.length_missing"),
            )
        )
    elif options.duration_s is not None and options.transactions is not None:
        found.append(
            (
                "duration",
                Message(
                    N_("Give a duration or a number of transactions per client, not both."), "run.length_both"
                ),
            )
        )
    if options.duration_s is not None and not 1 <= options.duration_s <= MAX_DURATION_S:
        found.append(
            (
                "duration",
                Message(
                    N_("Duration must be between 1 and %(max)s seconds."),
                    "run.duration_range",
                    max=Count(MAX_DURATION_S),
                ),
            )
        )
    if options.transactions is not None and not 1 <= options.transactions <= MAX_TRANSACTIONS:
        found.append(
            (
                "transactions",
                Message(
                    N_("Transactions per client must be between 1 and %(max)s."),
                    "run.transactions_range",
                    max=Count(MAX_TRANSACTIONS),
                ),
            )
        )
    if not 1 <= options.progress_interval_s <= MAX_PROGRESS_S:
        found.append(
            (
                "progress",
                Message(
                    N_("Progress interval must be between 1 and %(max)s seconds."),
                    "run.progress_range",
                    max=Count(MAX_PROGRESS_S),
                ),
            )
        )
    if options.builtin is not None and options.custom_script_path is not None:
        found.append(
            (
                "script",
                Message(N_("Choose a built-in script or a custom script, not both."), "run.script_both"),
            )
        )
    elif options.builtin is not None and options.builtin not in BUILTIN_SCRIPTS:
        found.append(
            (
                "script",
                Message(
                    N_("Unknown built-in script %(script)s: choose one of %(choices)s."),
                    "run.script_unknown",
                    script=repr(options.builtin),
                    choices=", ".join(BUILTIN_SCRIPTS),
                ),
            )
        )
    if options.custom_script_path is not None and not options.custom_script_path.strip():
        found.append(("script", Message(N_("The custom script path is empty."), "run.script_path_empty")))
    if options.query_mode not in QUERY_MODES:
        found.append(
            (
                "query_mode",
                Message(
                    N_("Unknown query mode %(mode)s: choose one of %(choices)s."),
                    "run.query_mode_unknown",
                    mode=repr(options.query_mode),
                    choices=", ".join(QUERY_MODES),
                ),
            )
        )
    if options.rate is not None and not options.rate > 0:
        found.append(
            ("rate", Message(N_("Rate must be greater than 0 transactions per second."), "run.rate_range"))
        )
    if options.latency_limit_ms is not None and not options.latency_limit_ms > 0:
        found.append(
            (
                "latency_limit",
                Message(N_("Latency limit must be greater than 0 ms."), "run.latency_limit_range"),
            )
        )
    if options.max_tries is not None:
        if options.max_tries < 0:
            found.append(
                (
                    "max_tries",
                    Message(N_("Maximum tries must be 0 (unlimited) or more."), "run.max_tries_range"),
                )
            )
        elif options.max_tries == 0 and options.latency_limit_ms is None and options.duration_s is None:
            found.append(
                (
                    "max_tries",
                    Message(
                        N_("Unlimited tries need a latency limit or a duration."), "run.max_tries_unbounded"
                    ),
                )
            )
    found += [("log", error) for error in _log_errors(options)]
    return found


def validate(options: RunOptions) -> list[str]:
    """The sentences of ``problems``: what the command line prints."""
    return [str(message) for _field, message in problems(options)]


def _log_errors(options: RunOptions) -> list[Message]:
    errors: list[Message] = []
    logging_options = (options.log_prefix, options.sampling_rate, options.aggregate_interval_s)
    if not options.log_transactions and any(value is not None for value in logging_options):
        errors.append(
            Message(
                N_("Log prefix, sampling rate and aggregate interval need the transaction log (-l)."),
                "run.log_needed",
            )
        )
    if options.sampling_rate is not None and not 0 < options.sampling_rate <= 1:
        errors.append(
            Message(N_("Sampling rate must be greater than 0 and at most 1."), "run.sampling_range")
        )
    if options.sampling_rate is not None and options.aggregate_interval_s is not None:
        errors.append(
            Message(N_("Sampling and aggregation cannot be used together."), "run.sampling_and_aggregation")
        )
    interval = options.aggregate_interval_s
    if interval is not None:
        if interval < 1:
            errors.append(Message(N_("Aggregate interval must be at least 1 second."), "run.aggregate_range"))
        elif options.duration_s is not None and (
            interval > options.duration_s or options.duration_s % interval
        ):
            errors.append(
                Message(
                    N_("The duration must be a multiple of the aggregate interval."), "run.aggregate_multiple"
                )
            )
    return errors


def init_problems(options: InitOptions) -> list[tuple[str, Message]]:
    """Blocking errors for ``pgbench -i`` as ``(field, sentence)``: ``scale`` or ``init_steps``."""
    found: list[tuple[str, Message]] = []
    if not 1 <= options.scale <= MAX_SCALE:
        found.append(
            (
                "scale",
                Message(
                    N_("Scale must be between 1 and %(max)s."), "dataset.scale_range", max=Count(MAX_SCALE)
                ),
            )
        )
    steps = options.init_steps
    if steps is not None:
        unknown = sorted({letter for letter in steps if letter not in INIT_STEP_LETTERS})
        if not steps:
            found.append(
                ("init_steps", Message(N_("Give at least one initialization step."), "dataset.steps_missing"))
            )
        elif unknown:
            found.append(
                (
                    "init_steps",
                    Message(
                        N_("Unknown initialization step %(steps)s: allowed steps are %(allowed)s."),
                        "dataset.steps_unknown",
                        steps=", ".join(map(repr, unknown)),
                        allowed=", ".join(INIT_STEP_LETTERS),
                    ),
                )
            )
        elif len(set(steps)) != len(steps):
            found.append(
                (
                    "init_steps",
                    Message(N_("Each initialization step may appear only once."), "dataset.steps_repeated"),
                )
            )
        elif "g" in steps and "G" in steps:
            found.append(
                (
                    "init_steps",
                    Message(
                        N_("Generate data client-side (g) or server-side (G), not both."),
                        "dataset.steps_both_g",
                    ),
                )
            )
    return found


def validate_init(options: InitOptions) -> list[str]:
    """The sentences of ``init_problems``: what the command line prints."""
    return [str(message) for _field, message in init_problems(options)]


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
) -> list[Message]:
    """Non-blocking warnings about a run that will work badly; ``pool_mode`` None means direct."""
    found: list[Message] = []
    clients = options.clients
    uses_transactions = (
        options.script_uses_transactions if script_uses_transactions is None else script_uses_transactions
    )
    if scale is not None and clients > scale and options.script == "tpcb-like":
        found.append(
            Message(
                N_(
                    "%(clients)s clients on a scale of %(scale)s: every TPC-B-like transaction updates one of "
                    "%(scale)s branch rows, so clients mostly wait for each other's row locks. "
                    "Initialise with a scale of at least %(clients)s to measure the server rather than lock "
                    "contention."
                ),
                "run.warn_lock_contention",
                clients=clients,
                scale=scale,
            )
        )
    if target_max_connections is not None and clients > target_max_connections:
        if pool_mode is None:
            found.append(
                Message(
                    N_(
                        "%(clients)s clients but the server accepts at most %(max)s connections for this "
                        "user: pgbench will not start (connections refused). Use a connection pool or fewer "
                        "clients."
                    ),
                    "run.warn_over_server_limit",
                    clients=clients,
                    max=target_max_connections,
                )
            )
        else:
            found.append(
                Message(
                    N_(
                        "%(clients)s clients but PgBouncer accepts at most %(max)s client connections: "
                        "the extra clients will be refused."
                    ),
                    "run.warn_over_pooler_limit",
                    clients=clients,
                    max=target_max_connections,
                )
            )
    if pool_mode == "statement" and uses_transactions:
        found.append(
            Message(
                N_(
                    "Statement pools reject transaction blocks, and the %(script)s script uses BEGIN ... END: "
                    "every client will abort ('transaction blocks not allowed in statement pooling mode'). "
                    "Use select-only, a script without transactions, or a transaction pool."
                ),
                "run.warn_statement_pool_transactions",
                script=options.script,
            )
        )
    if pool_mode == "session" and pool_size is not None and clients > pool_size:
        found.append(
            Message(
                N_(
                    "In session mode each client keeps a server connection for its whole session: "
                    "%(waiting)s of %(clients)s clients will wait for one of the %(size)s and may be "
                    "dropped (query_wait_timeout). Use a transaction pool to share connections."
                ),
                "run.warn_session_pool_wait",
                waiting=clients - pool_size,
                clients=clients,
                size=pool_size,
            )
        )
    version = _parse_version(pgbouncer_version)
    if (
        options.query_mode == "prepared"
        and pool_mode in ("transaction", "statement")
        and (version is None or version < PGBOUNCER_PREPARED_SINCE)
    ):
        shown = f"PgBouncer {'.'.join(map(str, version))}" if version else "PgBouncer < 1.21"
        found.append(
            Message(
                N_(
                    "%(pgbouncer)s does not track prepared statements in %(mode)s pools: clients will fail "
                    "with 'prepared statement \"P_0\" does not exist'. Use the simple or extended query mode."
                ),
                "run.warn_prepared_through_pool",
                pgbouncer=shown,
                mode=pool_mode,
            )
        )
    if options.threads > 1 and clients % options.threads:
        found.append(
            Message(
                N_(
                    "%(clients)s clients do not divide evenly among %(threads)s threads: "
                    "some threads will drive more clients than others."
                ),
                "run.warn_uneven_threads",
                clients=clients,
                threads=options.threads,
            )
        )
    if options.duration_s is not None and options.progress_interval_s > options.duration_s:
        found.append(
            Message(
                N_("The progress interval is longer than the run: no progress will be reported."),
                "run.warn_progress_too_long",
            )
        )
    return found
