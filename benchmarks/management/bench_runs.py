"""Parts of ``manage.py bench``: data sets and runs (init, run, cleanup, list, show, cancel, export),
through the same services as the Benchmarks tab."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from benchmarks import services
from benchmarks.lib import engines
from benchmarks.models import BenchmarkRun, RunStatus, Sweep
from panel.clusters.face import PanelCommand, find_cluster
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

WAIT_TURN_S = 24 * 3600


Row = TypeVar("Row", BenchmarkRun, Sweep)


def find_row(model: type[Row], pk: str, what: str) -> Row:
    """The run or sweep ``pk`` names, with its cluster; a CommandError when there is none."""
    try:
        return model.objects.select_related("cluster").get(pk=pk)
    except (model.DoesNotExist, ValueError, ValidationError):
        raise CommandError(f"No {what} {pk!r}.") from None


def find_pool(cluster: Cluster, name: str) -> ConnectionPool:
    pool = ConnectionPool.objects.filter(cluster=cluster, name=name).first()
    if pool is None:
        raise CommandError(f"No pool named {name!r} on {cluster.name}.")
    return pool


class RunSubcommands(PanelCommand):
    def _run(self, run_id: str) -> BenchmarkRun:
        return find_row(BenchmarkRun, run_id, "run")

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

    def _say_queued(self, fmt: str, record: dict[str, Any], line: str) -> None:
        """What was queued: its record in JSON, or a line of text."""
        self.stdout.write(json.dumps(record) if fmt == "json" else line)

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
        pool = find_pool(cluster, opts["pool"]) if opts["pool"] else None
        custom_script = None
        if opts["file"]:
            try:
                custom_script = Path(opts["file"]).read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"Cannot read {opts['file']}: {exc.strerror}") from None
        options = engines.make_options(
            clients=opts["clients"],
            threads=opts["threads"],
            duration_s=opts["duration"],
            transactions=opts["transactions"],
            progress_interval_s=opts["progress"],
            builtin=opts["script"] or engines.ENGINES[opts["engine"]].default_script,
            query_mode=opts["protocol"],
            rate=opts["rate"],
            latency_limit_ms=opts["latency_limit"],
            connect_per_transaction=opts["connect"],
            max_tries=opts["max_tries"],
            engine=opts["engine"],
            tables=opts["tables"],
            table_size=opts["table_size"],
            extra=self._extra(opts),
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
            self._say_queued(
                opts["format"], {"id": str(run.pk), "status": run.status}, f"queued run {run.pk}"
            )
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

    @staticmethod
    def _extra(opts: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        try:
            return engines.extra_from_text(opts["engine"], opts.get("set") or [])
        except ValueError as exc:
            raise CommandError(f"--set {exc}") from None

    def do_cleanup(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        dropped = services.cleanup_dataset(cluster, opts["database"], opts["engine"])
        self.stdout.write(
            f"dropped {opts['engine']}'s tables in {opts['database']} ({dropped} data sets forgotten)"
        )

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

    def do_export(self, opts: dict[str, Any]) -> None:
        self.stdout.write(services.export_run(self._run(opts["run_id"]), opts["format"]), ending="")
