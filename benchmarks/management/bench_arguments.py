"""The command line of ``manage.py bench``: its subcommands and their options."""

from __future__ import annotations

from django.core.management.base import CommandParser

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb


def _engine_choices() -> list[str]:
    """Every registered engine (an engine module of ``PANEL_BENCH_ENGINES`` too)."""
    return list(engines.ENGINES)


def _script_choices() -> list[str]:
    return [script for engine in engines.ENGINES.values() for script in engine.scripts]


def _own_fields() -> str:
    owned = [
        f"{name}: {', '.join(s.name for s in e.extra_fields)}"
        for name, e in engines.ENGINES.items()
        if e.extra_fields
    ]
    return "; ".join(owned) or "no engine has any"


def _script_help() -> str:
    return "default: " + ", ".join(f"{e.default_script} ({name})" for name, e in engines.ENGINES.items())


def add_arguments(parser: CommandParser) -> None:
    """Every subcommand of ``bench`` and its options."""
    sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    p = sub.add_parser("init", help="Initialise an engine's tables (pgbench -i, sysbench prepare).")
    p.add_argument("cluster", metavar="CLUSTER")
    p.add_argument("--owner", metavar="USERNAME")
    p.add_argument("--database", required=True)
    p.add_argument("--engine", choices=_engine_choices(), default=engines.PGBENCH)
    p.add_argument("--scale", type=int, help="pgbench's scale factor (required for pgbench)")
    p.add_argument("--tables", type=int, help=f"sysbench: tables (default {sb.DEFAULT_TABLES})")
    p.add_argument(
        "--table-size", type=int, help=f"sysbench: rows per table (default {sb.DEFAULT_TABLE_SIZE})"
    )
    p.add_argument("--init-steps", metavar="STEPS")
    p.add_argument("--foreign-keys", action="store_true")
    p.add_argument("--wait", action="store_true", help="run in the foreground")

    p = sub.add_parser("run", help="Launch a benchmark run (pgbench, sysbench or another engine).")
    p.add_argument("cluster", metavar="CLUSTER")
    p.add_argument("--owner", metavar="USERNAME")
    p.add_argument("--engine", choices=_engine_choices(), default=engines.PGBENCH)
    target = p.add_mutually_exclusive_group()
    target.add_argument("--pool", metavar="POOL", help="run through this connection pool")
    target.add_argument("--database", metavar="DB", help="run directly against this database")
    p.add_argument("--user", metavar="USER")
    p.add_argument("--clients", "-c", type=int, required=True)
    length = p.add_mutually_exclusive_group(required=True)
    length.add_argument("--duration", "-T", type=int, metavar="SECONDS")
    length.add_argument("--transactions", "-t", type=int, metavar="N", help="transactions per client")
    p.add_argument("--threads", "-j", type=int)
    p.add_argument("--progress", type=int, default=1, metavar="SECONDS")
    script = p.add_mutually_exclusive_group()
    script.add_argument(
        "--script",
        choices=_script_choices(),
        help=_script_help(),
    )
    script.add_argument("--file", metavar="FILE", help="a custom script")
    p.add_argument("--rate", type=float)
    p.add_argument("--latency-limit", type=float, metavar="MS")
    p.add_argument("--connect", action="store_true", help="new connection per transaction (-C)")
    p.add_argument("--protocol", choices=cmd.QUERY_MODES, default="simple")
    p.add_argument("--max-tries", type=int)
    p.add_argument("--tables", type=int, help="sysbench: default, its data set's")
    p.add_argument("--table-size", type=int, help="sysbench: default, its data set's")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a field of the engine's own (" + _own_fields() + ")",
    )
    p.add_argument("--label", default="")
    p.add_argument("--wait", action="store_true", help="run in the foreground and print the summary")
    p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("cleanup", help="Drop an engine's tables of a database (sysbench cleanup).")
    p.add_argument("cluster", metavar="CLUSTER")
    p.add_argument("--owner", metavar="USERNAME")
    p.add_argument("--database", required=True)
    p.add_argument("--engine", choices=_engine_choices(), default=engines.SYSBENCH)

    p = sub.add_parser("list", help="List the runs of a cluster.")
    p.add_argument("cluster", metavar="CLUSTER")
    p.add_argument("--owner", metavar="USERNAME")
    p.add_argument("--limit", type=int, default=30)

    for name, text in (("show", "Show a run."), ("cancel", "Cancel a queued or running run.")):
        p = sub.add_parser(name, help=text)
        p.add_argument("run_id", metavar="RUN_ID")
        if name == "show":
            p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser(
        "sweep",
        help="Plan a sweep: client counts × targets, or × sizes of one pool (--pool-sizes), and "
        "print its grid with --wait.",
    )
    p.add_argument("cluster", metavar="CLUSTER")
    p.add_argument("--owner", metavar="USERNAME")
    p.add_argument("--clients", required=True, metavar="N,N,…", help="client counts, e.g. 2,5,10")
    p.add_argument(
        "--targets",
        metavar="T,T,…",
        help="direct and/or pool names, e.g. direct,test-pool (default direct)",
    )
    p.add_argument("--pool-sizes", metavar="N,N,…", help="resize one pool to each size in turn")
    p.add_argument("--pool", metavar="POOL", help="the pool --pool-sizes resizes (default: a scratch pool)")
    p.add_argument("--database", metavar="DB", help="of the direct runs and of a scratch pool")
    p.add_argument("--engine", choices=_engine_choices(), default=engines.PGBENCH)
    p.add_argument(
        "--script",
        choices=_script_choices(),
        help=_script_help(),
    )
    p.add_argument("--duration", "-T", type=int, default=30, metavar="SECONDS", help="of each run")
    p.add_argument("--repeats", type=int, default=1, help="runs per cell; the grid shows their median")
    p.add_argument("--protocol", choices=cmd.QUERY_MODES, default="simple")
    p.add_argument("--connect", action="store_true", help="new connection per transaction (-C)")
    p.add_argument("--name", default="")
    p.add_argument("--wait", action="store_true", help="run in the foreground and print the grid")
    p.add_argument("--format", choices=("text", "json"), default="text")

    for name, text in (
        ("sweep-show", "Show a sweep's grid and findings."),
        ("sweep-cancel", "Cancel a sweep's queued and running runs and give its pool back."),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("sweep_id", metavar="SWEEP_ID")
        if name == "sweep-show":
            p.add_argument("--format", choices=("text", "json"), default="text")

    p = sub.add_parser("export", help="Export a run's samples (csv) or whole record (json).")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("--format", choices=("csv", "json"), default="csv")


# --- helpers --------------------------------------------------------------------------------
