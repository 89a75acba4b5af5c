"""sysbench 1.0 command lines (argument lists, never shell strings) and its rules (pure, no Django).

A run is the same :class:`RunOptions` as pgbench's with ``engine="sysbench"``: ``builtin`` names an
``oltp_*`` script, ``clients`` are sysbench's ``--threads`` (one connection each), ``duration_s`` its
``--time``, ``transactions`` per client become ``--events`` (clients × transactions, in total),
``progress_interval_s`` its ``--report-interval``, ``rate`` its ``--rate``; ``tables`` and
``table_size`` must match the data set ``prepare`` made. ``query_mode`` holds ``--db-ps-mode``:
``disable`` through transaction and statement pools (PgBouncer 1.18 keeps no prepared statement
across transactions: every client fails with 'prepared statement "sbstmt…" does not exist'),
``auto`` otherwise.

The password is never an argument: sysbench's ``--pgsql-password`` defaults to empty, and libpq then
reads ``PGPASSWORD`` from the environment (``PQsetdbLogin`` ignores empty values), as it reads
``PGSSLMODE`` (the clusters accept TCP only with TLS), ``PGCONNECT_TIMEOUT`` and ``PGAPPNAME``:
:func:`benchmarks.lib.pgbench_command.build_env` makes the same environment for both tools.
"""

from __future__ import annotations

from benchmarks.lib.pgbench_options import MAX_CLIENTS, ConnectionTarget, RunOptions

PGBENCH = "pgbench"
SYSBENCH = "sysbench"
ENGINES = (PGBENCH, SYSBENCH)
SYSBENCH_SCRIPTS = ("oltp_read_write", "oltp_read_only", "oltp_point_select", "oltp_write_only")
PS_MODES = ("auto", "disable")
# Pools that hand a client a server connection per transaction (or statement).
PS_UNSAFE_POOL_MODES = frozenset({"transaction", "statement"})
MAX_TABLES = 1_000
MAX_TABLE_SIZE = 1_000_000_000
DEFAULT_TABLES = 4
DEFAULT_TABLE_SIZE = 100_000


def ps_mode_for(pool_mode: str | None) -> str:
    """``--db-ps-mode`` for a target: ``disable`` through transaction and statement pools."""
    return "disable" if pool_mode in PS_UNSAFE_POOL_MODES else "auto"


def _dbname(dbname: str) -> str:
    # libpq's PQsetdbLogin reads a database name holding "=" as a connection string: quote it.
    if "=" in dbname or dbname.startswith(("postgres://", "postgresql://")):
        escaped = dbname.replace("\\", "\\\\").replace("'", "\\'")
        return f"dbname='{escaped}'"
    return dbname


def _connection_args(target: ConnectionTarget) -> list[str]:
    # No --pgsql-password: see the module's docstring.
    return [
        "--db-driver=pgsql",
        f"--pgsql-host={target.host}",
        f"--pgsql-port={target.port}",
        f"--pgsql-user={target.user}",
        f"--pgsql-db={_dbname(target.dbname)}",
    ]


def build_run_args(sysbench_path: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
    """The argument list of ``sysbench SCRIPT … run``; call :func:`problems` first.

    ``--histogram`` makes the report hold the latency distribution, from which the run's p50, p95
    and p99 are read; ``--percentile=95`` is the one percentile of each interval line. sysbench
    loads any Lua file its first argument names: anything but a built-in OLTP name is refused.
    """
    if options.builtin not in SYSBENCH_SCRIPTS:
        raise ValueError(f"not a built-in sysbench script: {options.builtin!r}")
    args = [
        sysbench_path,
        options.builtin,
        *_connection_args(target),
        f"--tables={options.tables}",
        f"--table-size={options.table_size}",
        f"--threads={options.clients}",
    ]
    if options.duration_s is not None:
        args.append(f"--time={options.duration_s}")
    else:
        args += [f"--events={options.clients * (options.transactions or 0)}", "--time=0"]
    args += [f"--report-interval={options.progress_interval_s}", "--percentile=95", "--histogram=on"]
    if options.rate is not None:
        args.append(f"--rate={max(1, round(options.rate))}")
    args += [f"--db-ps-mode={options.query_mode}", "run"]
    return args


def build_prepare_args(
    sysbench_path: str, target: ConnectionTarget, tables: int, table_size: int, command: str = "prepare"
) -> list[str]:
    """``sysbench oltp_common … prepare`` (or ``cleanup``): the tables every ``oltp_*`` script uses,
    one table after the other (its lines feed the progress bar)."""
    args = [sysbench_path, "oltp_read_write", *_connection_args(target), f"--tables={tables}"]
    if command == "prepare":
        args.append(f"--table-size={table_size}")
    return [*args, command]


def problems(options: RunOptions) -> list[tuple[str, str]]:
    """Blocking errors of a sysbench run as ``(field, sentence)``, like pgbench's ``problems``."""
    found: list[tuple[str, str]] = []
    if not 1 <= options.clients <= MAX_CLIENTS:
        found.append(("clients", f"Clients must be between 1 and {MAX_CLIENTS:,}."))
    if options.custom_script_path is not None:
        found.append(
            ("script", "sysbench runs its built-in OLTP scripts only; custom scripts are pgbench's.")
        )
    elif options.builtin not in SYSBENCH_SCRIPTS:
        found.append(
            (
                "script",
                f"Unknown sysbench script {options.builtin!r}: choose one of {', '.join(SYSBENCH_SCRIPTS)}.",
            )
        )
    if (options.duration_s is None) == (options.transactions is None):
        found.append(("duration", "Give a duration or a number of transactions per client, not both."))
    elif options.duration_s is not None and options.duration_s < 1:
        found.append(("duration", "Duration must be at least 1 second."))
    elif options.transactions is not None and options.transactions < 1:
        found.append(("transactions", "Transactions per client must be at least 1."))
    if options.query_mode not in PS_MODES:
        found.append(("query_mode", f"Unknown prepared statement mode {options.query_mode!r}."))
    if options.rate is not None and not options.rate >= 1:
        found.append(("rate", "sysbench's rate is a whole number of transactions per second, at least 1."))
    unsupported = (
        ("latency_limit", options.latency_limit_ms is not None, "a latency limit"),
        ("connect", options.connect_per_transaction, "a new connection per transaction (-C)"),
        ("max_tries", options.max_tries is not None, "max tries"),
    )
    for field, used, what in unsupported:
        if used:
            found.append((field, f"sysbench has no {what}: that option is pgbench's."))
    for field, value, top in (
        ("tables", options.tables, MAX_TABLES),
        ("table_size", options.table_size, MAX_TABLE_SIZE),
    ):
        if value is None or not 1 <= value <= top:
            found.append((field, f"{field.replace('_', ' ').capitalize()} must be between 1 and {top:,}."))
    return found


def prepare_problems(tables: int, table_size: int) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if not 1 <= tables <= MAX_TABLES:
        found.append(("tables", f"Tables must be between 1 and {MAX_TABLES:,}."))
    if not 1 <= table_size <= MAX_TABLE_SIZE:
        found.append(("table_size", f"Table size must be between 1 and {MAX_TABLE_SIZE:,} rows."))
    return found


def warnings(options: RunOptions, *, target_max_connections: int | None, pool_mode: str | None) -> list[str]:
    """Non-blocking advice before a sysbench run."""
    found: list[str] = []
    if target_max_connections is not None and options.clients > target_max_connections:
        if pool_mode is None:
            found.append(
                f"{options.clients} clients but the server accepts at most {target_max_connections} "
                "connections for this user: sysbench will not start. Use a connection pool or fewer clients."
            )
        else:
            found.append(
                f"{options.clients} clients but PgBouncer accepts at most {target_max_connections} client "
                "connections: the extra clients will be refused."
            )
    if pool_mode == "statement" and options.builtin != "oltp_point_select":
        found.append(
            f"Statement pools reject transaction blocks, and {options.builtin} uses BEGIN ... COMMIT: "
            "use oltp_point_select or a transaction pool."
        )
    if pool_mode in PS_UNSAFE_POOL_MODES:
        found.append(
            "Through a transaction pool sysbench runs without prepared statements (--db-ps-mode=disable): "
            "PgBouncer 1.18 does not keep them across transactions."
        )
    if options.duration_s is not None and options.progress_interval_s > options.duration_s:
        found.append("The progress interval is longer than the run: no progress will be reported.")
    return found
