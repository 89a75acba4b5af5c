"""Recording a run as its tool reports it: samples, errors and counts as they come, the outcome at the end.

The executor (``execute``) feeds every line the tool writes to ``handle``, calls ``tick`` on each
tick and ``finish`` once the tool has exited, whichever the tool: :class:`RunRecorder` holds what
both share (the sample sequence, the errors, the last transition), :class:`PgbenchRecorder` reads
pgbench and its transaction log, ``sysbench_recorder.SysbenchRecorder`` sysbench. Nothing here
spawns, signals or waits for a process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.lib.pgbench_output import (
    CONNECTION_FAILED,
    DETAIL,
    FATAL_KINDS,
    IGNORED,
    WARNING,
    ErrorLine,
    ProgressSample,
    StderrParser,
    classify_exit,
    parse_summary,
)
from benchmarks.models import BenchmarkRun, InvalidTransition, RunError, RunSample, RunStatus
from benchmarks.services.percentiles import Percentiles

NOT_COUNTED = frozenset({IGNORED, WARNING, DETAIL})  # context, not errors of the run


class RunRecorder:
    """What one run has reported so far, either tool: its samples' sequence and the errors it counted."""

    def __init__(self, run: BenchmarkRun) -> None:
        self.run = run
        self.seq = 0
        self.new_errors: list[tuple[ErrorLine, float]] = []
        self.error_count = 0
        self.stored_errors = 0
        self.first_error = ""

    def handle(self, line: runner.Line) -> None:
        raise NotImplementedError

    def tick(self) -> None:
        """The executor's tick: store what came since the last."""
        self.flush_errors()

    def finish(self, returncode: int | None, *, cancelled: bool, stopped_reason: str) -> None:
        raise NotImplementedError

    def next_sample(self, sample: ProgressSample, line: runner.Line) -> float | None:
        """Count a new sample; on the first, record when the tool's clock started (its epoch)."""
        self.seq += 1
        if self.seq != 1:
            return None
        start = line.at - sample.elapsed_s
        BenchmarkRun.objects.filter(pk=self.run.pk).update(bench_start_epoch=start)
        return start

    def flush_errors(self) -> None:
        if not self.new_errors:
            return
        batch, self.new_errors = self.new_errors, []
        rows = []
        for error, at in batch:
            if error.kind not in NOT_COUNTED:
                self.error_count += 1
            if not self.first_error and error.kind in FATAL_KINDS:
                self.first_error = error.message
            if self.stored_errors < RunError.MAX_STORED:
                self.stored_errors += 1
                rows.append(
                    RunError(
                        run_id=self.run.pk,
                        at=_aware(at),
                        kind=error.kind,
                        message=error.message,
                        client_id=error.client_id,
                    )
                )
        RunError.objects.bulk_create(rows)
        BenchmarkRun.objects.filter(pk=self.run.pk).update(
            error_count=self.error_count, first_error=self.first_error
        )

    def record_outcome(
        self,
        status: str,
        reason: str,
        summary_data: dict[str, Any] | None,
        code: int,
        *,
        aborted_clients: int,
        cancelled: bool,
        stopped_reason: str,
    ) -> None:
        """The run's last transition (either tool): the status its exit means, unless cancelled or stopped."""
        run = self.run
        details = {"exit_code": code, "summary": summary_data, "aborted_clients": aborted_clients}
        BenchmarkRun.objects.filter(pk=run.pk).update(aborted_clients=aborted_clients)
        try:
            if cancelled:
                raise InvalidTransition("cancelled")
            if stopped_reason:
                run.fail(stopped_reason, summary=summary_data, exit_code=code)
            elif status == RunStatus.SUCCEEDED:
                run.succeed(summary=summary_data, exit_code=code)
            elif status == RunStatus.COMPLETED_WITH_ERRORS:
                run.complete_with_errors(reason, summary=summary_data, exit_code=code)
            else:
                run.fail(reason, summary=summary_data, exit_code=code)
        except InvalidTransition:
            # Cancelled or reaped meanwhile: keep that status, still record what the tool said.
            BenchmarkRun.objects.filter(pk=run.pk).update(**details)


class PgbenchRecorder(RunRecorder):
    """pgbench's run: progress lines and errors on stderr, the summary on stdout, and per-interval
    percentiles from its transaction log."""

    def __init__(self, run: BenchmarkRun, parser: StderrParser, percentiles: Percentiles) -> None:
        super().__init__(run)
        self.parser = parser
        self.percentiles = percentiles
        self.stdout: list[str] = []

    def handle(self, line: runner.Line) -> None:
        if line.stream == runner.STDOUT:
            self.stdout.append(line.text)
            return
        event = self.parser.feed(line.text)
        if isinstance(event, ProgressSample):
            start = self.next_sample(event, line)
            if start is not None:
                self.percentiles.set_start(start)
            RunSample.objects.create(
                run_id=self.run.pk,
                seq=self.seq,
                elapsed_s=event.elapsed_s,
                tps=event.tps,
                latency_avg_ms=event.latency_avg_ms,
                latency_stddev_ms=event.latency_stddev_ms,
                failed=event.failed,
                lag_ms=event.lag_ms,
                skipped=event.skipped,
                retried=event.retried,
                retries=event.retries,
                received_at=_aware(line.at),
            )
            self.percentiles.flush(self.seq)
        elif isinstance(event, ErrorLine):
            self.new_errors.append((event, line.at))

    def tick(self) -> None:
        self.percentiles.poll()
        self.percentiles.flush(self.seq)
        super().tick()

    def finish(self, returncode: int | None, *, cancelled: bool, stopped_reason: str) -> None:
        """Record the end: the status pgbench's exit, summary and errors mean, unless cancelled or stopped."""
        self.percentiles.poll(final=True)
        self.percentiles.flush(self.seq)
        self.flush_errors()
        parser = self.parser
        summary = parse_summary("".join(self.stdout), run_aborted=parser.run_aborted)
        summary_data = json.loads(json.dumps(dataclasses.asdict(summary))) if summary else None
        code = returncode if returncode is not None else -9
        status, reason = classify_exit(code, summary, parser.errors)
        refused = next((e for e in parser.errors if e.kind == CONNECTION_FAILED), None)
        if status == RunStatus.FAILED and code < 0 and refused is not None:
            # pgbench 15 can die of a signal instead of exiting 1 when connections are refused.
            reason = _("could not start: %(m)s") % {"m": refused.message}
        self.record_outcome(
            status,
            reason,
            summary_data,
            code,
            aborted_clients=len(parser.aborted_clients),
            cancelled=cancelled,
            stopped_reason=stopped_reason,
        )


def _aware(epoch: float) -> Any:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)
