"""`manage.py bench …`: pgbench and sysbench data sets and runs from the command line, through the
same services (``--engine sysbench`` for sysbench's ``prepare``, ``run`` and ``cleanup``).

``bench sweep`` plans client counts × targets (``--targets direct,POOL``) or × sizes of one pool
(``--pool-sizes 5,10,20 [--pool POOL]``); ``sweep-show`` prints its grid and findings.

``bench run --wait``, ``bench init --wait`` and ``bench sweep --wait`` execute in the foreground (no worker needed);
without ``--wait`` the job is queued for a Celery worker. Clusters are named by their name; when
several users own a cluster of that name, ``--owner`` picks one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError, CommandParser

from benchmarks import services
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb
from benchmarks.models import BenchmarkRun, RunStatus, Sweep
from panel.clusters.management.cli import PanelCommand, find_cluster
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

WAIT_TURN_S = 24 * 3600


class Command(PanelCommand):
    help = "Initialise pgbench or sysbench data sets and run, list, show, cancel and export benchmark runs."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

        p = sub.add_parser("init", help="Initialise pgbench's tables (pgbench -i) or sysbench's (prepare).")
        p.add_argument("cluster", metavar="CLUSTER")
        p.add_argument("--owner", metavar="USERNAME")
        p.add_argument("--database", required=True)
        p.add_argument("--engine", choices=sb.ENGINES, default=sb.PGBENCH)
        p.add_argument("--scale", type=int, help="pgbench's scale factor (required for pgbench)")
        p.add_argument("--tables", type=int, help=f"sysbench: tables (default {sb.DEFAULT_TABLES})")
        p.add_argument(
            "--table-size", type=int, help=f"sysbench: rows per table (default {sb.DEFAULT_TABLE_SIZE})"
        )
        p.add_argument("--init-steps", metavar="STEPS")
        p.add_argument("--foreign-keys", action="store_true")
        p.add_argument("--wait", action="store_true", help="run in the foreground")

        p = sub.add_parser("run", help="Launch a pgbench or sysbench run.")
        p.add_argument("cluster", metavar="CLUSTER")
        p.add_argument("--owner", metavar="USERNAME")
        p.add_argument("--engine", choices=sb.ENGINES, default=sb.PGBENCH)
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
            choices=(*cmd.BUILTIN_SCRIPTS, *sb.SYSBENCH_SCRIPTS),
            help="default: tpcb-like (pgbench), oltp_read_write (sysbench)",
        )
        script.add_argument("--file", metavar="FILE", help="a custom script")
        p.add_argument("--rate", type=float)
        p.add_argument("--latency-limit", type=float, metavar="MS")
        p.add_argument("--connect", action="store_true", help="new connection per transaction (-C)")
        p.add_argument("--protocol", choices=cmd.QUERY_MODES, default="simple")
        p.add_argument("--max-tries", type=int)
        p.add_argument("--tables", type=int, help="sysbench: default, its data set's")
        p.add_argument("--table-size", type=int, help="sysbench: default, its data set's")
        p.add_argument("--label", default="")
        p.add_argument("--wait", action="store_true", help="run in the foreground and print the summary")
        p.add_argument("--format", choices=("text", "json"), default="text")

        p = sub.add_parser("cleanup", help="Drop sysbench's tables of a database (sysbench cleanup).")
        p.add_argument("cluster", metavar="CLUSTER")
        p.add_argument("--owner", metavar="USERNAME")
        p.add_argument("--database", required=True)
        p.add_argument("--engine", choices=(sb.SYSBENCH,), default=sb.SYSBENCH)

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
        p.add_argument(
            "--pool", metavar="POOL", help="the pool --pool-sizes resizes (default: a scratch pool)"
        )
        p.add_argument("--database", metavar="DB", help="of the direct runs and of a scratch pool")
        p.add_argument("--engine", choices=sb.ENGINES, default=sb.PGBENCH)
        p.add_argument(
            "--script",
            choices=(*cmd.BUILTIN_SCRIPTS, *sb.SYSBENCH_SCRIPTS),
            help="default: tpcb-like (pgbench), oltp_read_write (sysbench)",
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

    def _run(self, run_id: str) -> BenchmarkRun:
        try:
            return BenchmarkRun.objects.select_related("cluster").get(pk=run_id)
        except (BenchmarkRun.DoesNotExist, ValueError, ValidationError):
            raise CommandError(f"No run {run_id!r}.") from None

    def _print_run(self, run: BenchmarkRun, fmt: str) -> None:
        record = services.run_record(run)
        record["samples"] = run.samples.count()
        record["errors"] = run.error_count
        if fmt == "json":
            self.stdout.write(json.dumps(record, indent=2))
            return
        lines = [
            f"run        {run.pk}",
            f"status     {run.status}: {run.status_meaning}",
            f"target     {run.cluster.name} {run.target_display}, database {run.database}, user {run.user}",
            f"clients    {run.clients} ({run.threads} threads), script {run.script}, mode {run.query_mode}",
            "command    " + services.shown_command(run)[0].replace("\n", "\n" + " " * 11),
        ]
        if run.queue_position is not None:
            lines.append(f"queue      {run.queue_position} ahead")
        if run.error_message:
            lines.append(f"reason     {run.error_message.strip().splitlines()[-1]}")
        if run.first_error:
            lines.append(f"first err  {run.first_error}")
        summary = run.summary or {}
        if summary:
            lines.append(
                f"tps        {summary.get('tps')}   latency avg {summary.get('latency_avg_ms')} ms"
                f"   stddev {summary.get('latency_stddev_ms')} ms"
            )
            lines.append(
                f"processed  {summary.get('transactions_processed')} transactions,"
                f" {summary.get('failed_transactions')} failed"
            )
        lines.append(
            f"samples    {record['samples']}   errors {run.error_count}   aborted {run.aborted_clients}"
        )
        self.stdout.write("\n".join(lines))

    # --- subcommands ----------------------------------------------------------------------------

    def do_init(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        dataset = services.init_dataset(
            cluster,
            opts["database"],
            opts["scale"],
            opts["init_steps"],
            opts["foreign_keys"],
            engine=opts["engine"],
            tables=opts["tables"],
            table_size=opts["table_size"],
            enqueue=not opts["wait"],
        )
        if not opts["wait"]:
            self.stdout.write(f"queued data set {dataset.pk}")
            return
        dataset = services.execute_init(dataset.pk)
        size = f", {dataset.size_bytes / 1e6:.1f} MB" if dataset.size_bytes else ""
        self.stdout.write(f"{dataset.status}: {dataset.database} {dataset.shape}{size}")
        if dataset.error_message:
            raise CommandError(dataset.error_message)

    def do_run(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        pool = None
        if opts["pool"]:
            pool = ConnectionPool.objects.filter(cluster=cluster, name=opts["pool"]).first()
            if pool is None:
                raise CommandError(f"No pool named {opts['pool']!r} on {cluster.name}.")
        custom_script = None
        if opts["file"]:
            try:
                custom_script = Path(opts["file"]).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"Cannot read {opts['file']}: {exc.strerror}") from None
        options = cmd.run_options(
            clients=opts["clients"],
            threads=opts["threads"],
            duration_s=opts["duration"],
            transactions=opts["transactions"],
            progress_interval_s=opts["progress"],
            builtin=opts["script"] or ("oltp_read_write" if opts["engine"] == sb.SYSBENCH else "tpcb-like"),
            query_mode=opts["protocol"],
            rate=opts["rate"],
            latency_limit_ms=opts["latency_limit"],
            connect_per_transaction=opts["connect"],
            max_tries=opts["max_tries"],
            engine=opts["engine"],
            tables=opts["tables"],
            table_size=opts["table_size"],
        )
        run = services.launch_run(
            cluster,
            pool=pool,
            database=opts["database"],
            user=opts["user"],
            options=options,
            custom_script=custom_script,
            label=opts["label"],
            enqueue=not opts["wait"],
        )
        if opts["format"] == "text":
            for warning in run.warning_messages:
                self.stderr.write(f"warning: {warning}")
        if not opts["wait"]:
            if opts["format"] == "json":
                self.stdout.write(json.dumps({"id": str(run.pk), "status": run.status}))
            else:
                self.stdout.write(f"queued run {run.pk}")
            return
        if opts["format"] == "text":
            self.stderr.write(f"running {run.pk}: {run.command_display}")
        try:
            run = services.execute_run(run.pk, wait_turn_s=WAIT_TURN_S)
        except KeyboardInterrupt:
            run.refresh_from_db()
            if not run.is_terminal:
                services.cancel_run(run)
            raise CommandError("cancelled") from None
        self._print_run(run, opts["format"])
        if run.status not in (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_ERRORS):
            sys.exit(1)

    def do_cleanup(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        dropped = services.cleanup_dataset(cluster, opts["database"])
        self.stdout.write(f"dropped sysbench's tables in {opts['database']} ({dropped} data sets forgotten)")

    def do_list(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        runs = cluster.benchmark_runs.order_by("-created_at")[: opts["limit"]]
        self.stdout.write(f"{'ID':36}  {'STATUS':21}  {'TARGET':20}  {'CLIENTS':>7}  {'TPS':>9}  CREATED")
        for run in runs:
            tps = f"{run.tps:.1f}" if run.tps is not None else "-"
            self.stdout.write(
                f"{run.pk!s:36}  {run.status:21}  {run.target_display[:20]:20}  {run.clients:>7}  {tps:>9}  "
                f"{run.created_at:%Y-%m-%d %H:%M:%S}"
            )

    def do_show(self, opts: dict[str, Any]) -> None:
        self._print_run(self._run(opts["run_id"]), opts["format"])

    def do_cancel(self, opts: dict[str, Any]) -> None:
        run = services.cancel_run(self._run(opts["run_id"]))
        self.stdout.write(f"{run.pk}: {run.status}")

    def do_sweep(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        resizes = opts["pool_sizes"] is not None
        if resizes and opts["targets"]:
            raise CommandError("Give --targets or --pool-sizes, not both: a pool-size sweep has one pool.")
        if opts["pool"] and not resizes:
            raise CommandError("--pool names the pool --pool-sizes resizes; for targets use --targets.")
        clients = _numbers(opts["clients"], "--clients")
        options = cmd.run_options(
            clients=1,
            threads=1,
            duration_s=opts["duration"],
            builtin=opts["script"] or ("oltp_read_write" if opts["engine"] == sb.SYSBENCH else "tpcb-like"),
            query_mode="auto" if opts["engine"] == sb.SYSBENCH else opts["protocol"],
            connect_per_transaction=opts["connect"],
            engine=opts["engine"],
        )
        common: dict[str, Any] = {
            "clients_list": clients,
            "repeats": opts["repeats"],
            "base_options": options,
            "name": opts["name"],
            "enqueue": not opts["wait"],
        }
        if resizes:
            pool = _pool(cluster, opts["pool"]) if opts["pool"] else None
            sweep = services.launch_sweep(
                cluster,
                pool_sizes=_numbers(opts["pool_sizes"], "--pool-sizes"),
                pool=pool,
                database=None if pool else opts["database"],
                **common,
            )
        else:
            names = [n.strip() for n in (opts["targets"] or "direct").split(",") if n.strip()]
            pools = [None if n == "direct" else _pool(cluster, n) for n in names]
            direct = any(p is None for p in pools)
            sweep = services.launch_sweep(
                cluster, pools=pools, database=opts["database"] if direct else None, **common
            )
        if not opts["wait"]:
            if opts["format"] == "json":
                self.stdout.write(json.dumps({"id": str(sweep.pk), "runs": sweep.runs.count()}))
            else:
                self.stdout.write(f"queued sweep {sweep.pk} ({sweep.runs.count()} runs)")
            return
        if opts["format"] == "text":
            self.stderr.write(f"running sweep {sweep.pk}: {sweep.runs.count()} runs")
        try:
            sweep = services.execute_sweep(sweep, wait_turn_s=WAIT_TURN_S)
        except KeyboardInterrupt:
            services.cancel_sweep(sweep)
            raise CommandError("cancelled") from None
        self._print_sweep(sweep, opts["format"])

    def _sweep(self, sweep_id: str) -> Sweep:
        try:
            return Sweep.objects.select_related("cluster").get(pk=sweep_id)
        except (Sweep.DoesNotExist, ValueError, ValidationError):
            raise CommandError(f"No sweep {sweep_id!r}.") from None

    def _print_sweep(self, sweep: Sweep, fmt: str) -> None:
        report = services.sweep_report(sweep)
        if fmt == "json":
            runs = sweep.runs.order_by("sweep_index").values(
                "id", "status", "clients", "pool_name", "pool_size", "pool_size_applied"
            )
            record = {
                "id": str(sweep.pk),
                "kind": sweep.kind,
                "pool": sweep.pool_name or None,
                "restored": sweep.restored_at is not None,
                "restore_error": sweep.restore_error,
                **report,
                "runs": [{**run, "id": str(run["id"])} for run in runs],
            }
            self.stdout.write(json.dumps(record, indent=2, default=str))
            return
        self.stdout.write("\n".join(sweep_lines(sweep, report)))

    def do_sweep_show(self, opts: dict[str, Any]) -> None:
        self._print_sweep(self._sweep(opts["sweep_id"]), opts["format"])

    def do_sweep_cancel(self, opts: dict[str, Any]) -> None:
        sweep = self._sweep(opts["sweep_id"])
        cancelled = services.cancel_sweep(sweep)
        self.stdout.write(f"{sweep.pk}: {cancelled} runs cancelled")

    def do_export(self, opts: dict[str, Any]) -> None:
        self.stdout.write(services.export_run(self._run(opts["run_id"]), opts["format"]), ending="")


def _numbers(text: str, option: str) -> list[int]:
    try:
        numbers = sorted({int(word) for word in text.replace(",", " ").split()})
    except ValueError:
        raise CommandError(f"{option}: whole numbers separated by commas, e.g. 2,5,10.") from None
    if not numbers:
        raise CommandError(f"{option}: give at least one number.")
    return numbers


def _pool(cluster: Cluster, name: str) -> ConnectionPool:
    pool = ConnectionPool.objects.filter(cluster=cluster, name=name).first()
    if pool is None:
        raise CommandError(f"No pool named {name!r} on {cluster.name}.")
    return pool


def sweep_lines(sweep: Sweep, report: dict[str, Any]) -> list[str]:
    """The grid as text: a row per client count, a column per target or pool size; each cell the
    median TPS and latency, ``*`` on the best cell, ``!`` where runs or transactions failed."""
    labels = [series["label"] for series in report["series"]]
    width = max([22, *(len(label) + 2 for label in labels)])
    done = sum(1 for run in sweep.runs.all() if run.is_terminal)
    lines = [
        f"sweep      {sweep.pk} ({sweep.get_kind_display()}), {done} of {sweep.runs.count()} runs finished",
        "",
        f"{'clients':>7}  " + "".join(f"{label:>{width}}" for label in labels),
    ]
    for row in report["rows"]:
        cells = []
        for cell in row["cells"]:
            if cell is None:
                cells.append(f"{'-':>{width}}")
                continue
            latency = f"{cell['latency_avg_ms']:.2f} ms" if cell["latency_avg_ms"] is not None else "-"
            mark = ("*" if cell["best"] else "") + (
                "!" if cell["failed_runs"] or cell["failed_transactions"] else ""
            )
            cells.append(f"{cell['tps']:.1f} tps {latency}{mark:<2}".rjust(width))
        lines.append(f"{row['clients']:>7}  " + "".join(cells))
    lines.append("")
    lines.extend(report["sentences"] or ["No finding yet: no run measured a throughput."])
    for run in sweep.runs.filter(
        status__in=(RunStatus.FAILED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.ERRORED)
    ):
        reason = run.error_message.strip().splitlines()[-1] if run.error_message.strip() else ""
        lines.append(f"run {run.sweep_index + 1} ({run}): {run.status}: {reason or run.first_error}")
    if sweep.resizes_pool:
        if sweep.restore_error:
            lines.append(f"pool {sweep.pool_name}: NOT restored: {sweep.restore_error}")
        elif sweep.restored_at:
            what = "removed" if sweep.scratch_pool else f"size {sweep.original_pool_size} restored"
            lines.append(f"pool {sweep.pool_name}: {what}")
    return lines
