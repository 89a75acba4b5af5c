"""Recording a run as pgbench reports it: samples, errors and counts as they come, the outcome at the end.

The executor (``execute``) feeds every line pgbench writes to ``RunRecorder.handle`` and calls
``flush_errors`` on each tick and ``finish`` once pgbench has exited; nothing here spawns, signals
or waits for a process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from django.utils.translation import gettext as _

from benchmarks import runner
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
    """What one run has reported so far: its samples' sequence, stdout, and the errors it counted."""

    def __init__(self, run: BenchmarkRun) -> None:
        self.run = run
        self.seq = 0
        self.stdout: list[str] = []
        self.new_errors: list[tuple[ErrorLine, float]] = []
        self.error_count = 0
        self.stored_errors = 0
        self.first_error = ""

    def handle(self, line: runner.Line, parser: StderrParser, percentiles: Percentiles) -> None:
        if line.stream == runner.STDOUT:
            self.stdout.append(line.text)
            return
        event = parser.feed(line.text)
        if isinstance(event, ProgressSample):
            self.seq += 1
            if percentiles.start_epoch is None:
                start = line.at - event.elapsed_s
                percentiles.set_start(start)
                BenchmarkRun.objects.filter(pk=self.run.pk).update(bench_start_epoch=start)
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
            percentiles.flush(self.seq)
        elif isinstance(event, ErrorLine):
            self.new_errors.append((event, line.at))

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

    def finish(
        self, returncode: int | None, parser: StderrParser, *, cancelled: bool, stopped_reason: str
    ) -> None:
        """Record the end: the status pgbench's exit, summary and errors mean, unless cancelled or stopped."""
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


def _aware(epoch: float) -> Any:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)
