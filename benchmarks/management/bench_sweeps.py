"""Parts of ``manage.py bench``: sweeps (sweep, sweep-show, sweep-cancel) and how a sweep's grid prints."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError

from benchmarks import services
from benchmarks.lib import engines
from benchmarks.management.bench_runs import WAIT_TURN_S, RunSubcommands, find_pool, find_row
from benchmarks.models import RunStatus, Sweep
from panel.clusters.face import find_cluster


class SweepSubcommands(RunSubcommands):
    def do_sweep(self, opts: dict[str, Any]) -> None:
        cluster = find_cluster(opts["cluster"], opts.get("owner"))
        resizes = opts["pool_sizes"] is not None
        if resizes and opts["targets"]:
            raise CommandError("Give --targets or --pool-sizes, not both: a pool-size sweep has one pool.")
        if opts["pool"] and not resizes:
            raise CommandError("--pool names the pool --pool-sizes resizes; for targets use --targets.")
        clients = _numbers(opts["clients"], "--clients")
        options = engines.make_options(
            clients=1,
            threads=1,
            duration_s=opts["duration"],
            builtin=opts["script"] or engines.ENGINES[opts["engine"]].default_script,
            query_mode=engines.chosen_or_own(opts["engine"], "query_mode", opts["protocol"]),
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
            pool = find_pool(cluster, opts["pool"]) if opts["pool"] else None
            sweep = services.launch_sweep(
                cluster,
                pool_sizes=_numbers(opts["pool_sizes"], "--pool-sizes"),
                pool=pool,
                database=None if pool else opts["database"],
                **common,
            )
        else:
            names = [n.strip() for n in (opts["targets"] or "direct").split(",") if n.strip()]
            pools = [None if n == "direct" else find_pool(cluster, n) for n in names]
            direct = any(p is None for p in pools)
            sweep = services.launch_sweep(
                cluster, pools=pools, database=opts["database"] if direct else None, **common
            )
        if not opts["wait"]:
            record = {"id": str(sweep.pk), "runs": sweep.runs.count()}
            self._say_queued(opts["format"], record, f"queued sweep {sweep.pk} ({sweep.runs.count()} runs)")
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
        return find_row(Sweep, sweep_id, "sweep")

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


def _numbers(text: str, option: str) -> list[int]:
    try:
        numbers = sorted({int(word) for word in text.replace(",", " ").split()})
    except ValueError:
        raise CommandError(f"{option}: whole numbers separated by commas, e.g. 2,5,10.") from None
    if not numbers:
        raise CommandError(f"{option}: give at least one number.")
    return numbers


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
