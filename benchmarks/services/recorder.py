"""Recording a run as its tool reports it: samples, errors and counts as they come, the outcome at the end.

The executor (``execute``) feeds every line the tool writes to ``handle``, calls ``tick`` on each
tick and ``finish`` once the tool has exited. Whichever the tool, its engine's reader
(``Engine.reader``, pure) turns a line into a sample or an error and the exit into an outcome;
:class:`RunRecorder` stores them (with the per-interval percentiles of a transaction log, for an
engine that ``logs_transactions``). Nothing here spawns, signals or waits for a process.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from benchmarks.engine import runner
from benchmarks.lib.engine_base import OutputReader, Sample
from benchmarks.lib.pgbench_output import DETAIL, FATAL_KINDS, IGNORED, WARNING, ErrorLine
from benchmarks.models import BenchmarkRun, InvalidTransition, RunError, RunSample, RunStatus
from benchmarks.services.percentiles import Percentiles

NOT_COUNTED = frozenset({IGNORED, WARNING, DETAIL})  # context, not errors of the run


class RunRecorder:
    """What one run has reported so far, whichever its tool: its samples, the errors it counted,
    and its last transition, as its engine's reader says them."""

    def __init__(
        self, run: BenchmarkRun, reader: OutputReader, percentiles: Percentiles | None = None
    ) -> None:
        self.run = run
        self.reader = reader
        self.percentiles = percentiles
        self.seq = 0
        self.new_errors: list[tuple[ErrorLine, float]] = []
        self.error_count = 0
        self.stored_errors = 0
        self.first_error = ""

    def handle(self, line: runner.Line) -> None:
        event = self.reader.feed(line.stream, line.text)
        if isinstance(event, Sample):
            start = self.next_sample(event, line)
            if start is not None and self.percentiles is not None:
                self.percentiles.set_start(start)
            RunSample.objects.create(
                run_id=self.run.pk, seq=self.seq, received_at=_aware(line.at), **dataclasses.asdict(event)
            )
            if self.percentiles is not None:
                self.percentiles.flush(self.seq)
        elif isinstance(event, ErrorLine):
            self.new_errors.append((event, line.at))

    def tick(self) -> None:
        """The executor's tick: store what came since the last."""
        if self.percentiles is not None:
            self.percentiles.poll()
            self.percentiles.flush(self.seq)
        self.flush_errors()

    def finish(self, returncode: int | None, *, cancelled: bool, stopped_reason: str) -> None:
        """Record the end: the status the tool's exit, report and errors mean, unless cancelled or stopped."""
        if self.percentiles is not None:
            self.percentiles.poll(final=True)
            self.percentiles.flush(self.seq)
        self.flush_errors()
        code = returncode if returncode is not None else -9
        outcome = self.reader.finish(code)
        self.record_outcome(
            outcome.status,
            str(outcome.reason),
            outcome.summary,
            code,
            aborted_clients=outcome.aborted_clients,
            cancelled=cancelled,
            stopped_reason=stopped_reason,
        )

    def next_sample(self, sample: Sample, line: runner.Line) -> float | None:
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


def _aware(epoch: float) -> Any:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)
