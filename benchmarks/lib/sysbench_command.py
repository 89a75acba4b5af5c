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

from benchmarks.lib.run_options import ConnectionTarget, RunOptions
from benchmarks.lib.run_problems import clients_problems, problem, range_problems, unknown_script
from benchmarks.lib.run_warnings import client_limit_warnings, progress_warnings
from panel.core.errors import N_, Message

SYSBENCH = "sysbench"
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


def problems(options: RunOptions) -> list[tuple[str, Message]]:
    """Blocking errors of a sysbench run as ``(field, sentence)``, like pgbench's ``problems``."""
    found = clients_problems(options)
    if options.custom_script_path is not None:
        found.append(
            problem(
                "script",
                N_("sysbench runs its built-in OLTP scripts only; custom scripts are pgbench's."),
                "run.sysbench_custom_script",
            )
        )
    elif options.builtin not in SYSBENCH_SCRIPTS:
        sentence = N_("Unknown sysbench script %(script)s: choose one of %(choices)s.")
        found.append(unknown_script(options.builtin, SYSBENCH_SCRIPTS, sentence))
    if (options.duration_s is None) == (options.transactions is None):
        found.append(
            problem(
                "duration",
                N_("Give a duration or a number of transactions per client, not both."),
                "run.length_both",
            )
        )
    elif options.duration_s is not None and options.duration_s < 1:
        found.append(problem("duration", N_("Duration must be at least 1 second."), "run.duration_range"))
    elif options.transactions is not None and options.transactions < 1:
        found.append(
            problem(
                "transactions", N_("Transactions per client must be at least 1."), "run.transactions_range"
            )
        )
    if options.query_mode not in PS_MODES:
        found.append(
            problem(
                "query_mode",
                N_("Unknown prepared statement mode %(mode)s."),
                "run.query_mode_unknown",
                mode=repr(options.query_mode),
            )
        )
    if options.rate is not None and not options.rate >= 1:
        found.append(
            problem(
                "rate",
                N_("sysbench's rate is a whole number of transactions per second, at least 1."),
                "run.rate_range",
            )
        )
    unsupported = (
        (
            "latency_limit",
            options.latency_limit_ms is not None,
            N_("sysbench has no latency limit: that option is pgbench's."),
        ),
        (
            "connect",
            options.connect_per_transaction,
            N_("sysbench has no new connection per transaction (-C): that option is pgbench's."),
        ),
        (
            "max_tries",
            options.max_tries is not None,
            N_("sysbench has no max tries: that option is pgbench's."),
        ),
    )
    for field, used, sentence in unsupported:
        if used:
            found.append(problem(field, sentence, "run.sysbench_unsupported"))
    found += range_problems(
        "tables",
        options.tables,
        MAX_TABLES,
        N_("Tables must be between 1 and %(max)s."),
        "dataset.tables_range",
    )
    found += range_problems(
        "table_size",
        options.table_size,
        MAX_TABLE_SIZE,
        N_("Table size must be between 1 and %(max)s."),
        "dataset.table_size_range",
    )
    return found


def prepare_problems(tables: int, table_size: int) -> list[tuple[str, Message]]:
    return range_problems(
        "tables", tables, MAX_TABLES, N_("Tables must be between 1 and %(max)s."), "dataset.tables_range"
    ) + range_problems(
        "table_size",
        table_size,
        MAX_TABLE_SIZE,
        N_("Table size must be between 1 and %(max)s rows."),
        "dataset.table_size_range",
    )


def warnings(
    options: RunOptions, *, target_max_connections: int | None, pool_mode: str | None
) -> list[Message]:
    """Non-blocking advice before a sysbench run (the limits and the progress interval are every
    engine's, :mod:`benchmarks.lib.run_warnings`)."""
    found: list[Message] = client_limit_warnings(options, SYSBENCH, target_max_connections, pool_mode)
    if pool_mode == "statement" and options.builtin != "oltp_point_select":
        found.append(
            Message(
                N_(
                    "Statement pools reject transaction blocks, and %(script)s uses BEGIN ... COMMIT: "
                    "use oltp_point_select or a transaction pool."
                ),
                "run.warn_statement_pool_transactions",
                script=options.builtin,
            )
        )
    if pool_mode in PS_UNSAFE_POOL_MODES:
        found.append(
            Message(
                N_(
                    "Through a transaction pool sysbench runs without prepared statements (--db-ps-mode=disable): "
                    "PgBouncer 1.18 does not keep them across transactions."
                ),
                "run.warn_sysbench_ps_disabled",
            )
        )
    found += progress_warnings(options)
    return found
