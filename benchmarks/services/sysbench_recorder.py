"""Recording a sysbench run as it reports it: the same samples, errors and outcome as pgbench's.

sysbench says everything on stdout (see :mod:`benchmarks.lib.sysbench_output`): each interval
line is a sample (its latency percentile is the sample's p95, its queries per second the sample's
qps), each ``FATAL:`` line an error, and the final report the summary, with the run's p50, p95 and
p99 read off its latency histogram. Nothing here spawns, signals or waits for a process.
"""

from __future__ import annotations

from benchmarks.engine import runner
from benchmarks.lib.pgbench_output import CLIENT_ABORTED, ErrorLine, ProgressSample
from benchmarks.lib.sysbench_output import SysbenchParser, classify_exit, parse_report
from benchmarks.models import BenchmarkRun, RunSample
from benchmarks.services.recorder import RunRecorder, _aware


class SysbenchRecorder(RunRecorder):
    """What one sysbench run has reported so far, and its outcome at the end."""

    def __init__(self, run: BenchmarkRun, interval_s: int) -> None:
        super().__init__(run)
        self.parser = SysbenchParser(interval_s)

    def handle(self, line: runner.Line) -> None:
        event = self.parser.feed(line.text)
        if isinstance(event, ProgressSample):
            self.next_sample(event, line)
            figures = self.parser.last_figures
            RunSample.objects.create(
                run_id=self.run.pk,
                seq=self.seq,
                elapsed_s=event.elapsed_s,
                tps=event.tps,
                latency_avg_ms=None,
                latency_stddev_ms=None,
                qps=figures.qps if figures else None,
                failed=None,
                retried=event.retried,
                p95_ms=figures.latency_pct_ms if figures else None,
                # The transactions the interval's percentile was taken over (all of them).
                percentile_count=round(event.tps * self.parser.interval_s),
                received_at=_aware(line.at),
            )
        elif isinstance(event, ErrorLine):
            self.new_errors.append((event, line.at))

    def finish(self, returncode: int | None, *, cancelled: bool, stopped_reason: str) -> None:
        """Record the end: the status sysbench's exit, report and errors mean."""
        self.flush_errors()
        report = parse_report(self.parser.report_text)
        code = returncode if returncode is not None else -9
        status, reason = classify_exit(code, report, self.parser.errors, samples=self.parser.samples)
        summary = report.as_summary() if report is not None else None
        if summary is not None and summary.get("clients") is None:
            summary["clients"] = summary["threads"] = self.run.clients
        aborted = sum(1 for error in self.parser.errors if error.kind == CLIENT_ABORTED)
        self.record_outcome(
            status,
            reason,
            summary,
            code,
            aborted_clients=aborted,
            cancelled=cancelled,
            stopped_reason=stopped_reason,
        )
