"""Per-interval latency percentiles of a run, read from pgbench's transaction log as it grows."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from benchmarks.lib.pgbench_txlog import LatencyPercentiles, TxLogTail, interval_index
from benchmarks.models import BenchmarkRun, RunSample


class Percentiles:
    """Per-interval latency percentiles from the transaction log, read while the run goes on.

    Bucket ``k`` (transactions completed in ``[start + k*interval, start + (k+1)*interval)``)
    belongs to sample ``seq = k + 1``. Buckets are kept for ``RETAIN`` intervals after the newest
    one, because each thread's log is flushed on its own schedule.
    """

    RETAIN = 120

    def __init__(self, run: BenchmarkRun, tail: TxLogTail, interval_s: float) -> None:
        self.run = run
        self.tail = tail
        self.interval_s = interval_s
        self.start_epoch: float | None = None
        self.buckets: dict[int, list[float]] = {}
        self.pending: list[Any] = []  # records read before the start is known
        self.dirty: set[int] = set()
        self.stored: dict[int, LatencyPercentiles] = {}

    def set_start(self, epoch: float) -> None:
        self.start_epoch = epoch
        self._add(self.pending)
        self.pending = []

    def _add(self, records: Iterable[Any]) -> None:
        assert self.start_epoch is not None
        for record in records:
            if record.latency_us is None:
                continue
            key = interval_index(record.end_time, self.start_epoch, self.interval_s)
            self.buckets.setdefault(key, []).append(record.latency_us / 1000)
            self.dirty.add(key)

    def poll(self, *, final: bool = False) -> None:
        records = self.tail.poll(final=final)
        if self.start_epoch is None:
            self.pending.extend(records)
            return
        self._add(records)

    def flush(self, last_seq: int) -> None:
        """Write the percentiles of changed buckets whose sample row exists."""
        for key in sorted(self.dirty):
            seq = key + 1
            if seq > last_seq:
                continue
            figures = LatencyPercentiles.of(sorted(self.buckets[key]))
            self.dirty.discard(key)
            if self.stored.get(key) == figures:
                continue
            self.stored[key] = figures
            RunSample.objects.filter(run_id=self.run.pk, seq=seq).update(
                p50_ms=figures.p50_ms,
                p95_ms=figures.p95_ms,
                p99_ms=figures.p99_ms,
                percentile_count=figures.count,
            )
        if self.buckets:
            newest = max(self.buckets)
            for key in [key for key in self.buckets if key < newest - self.RETAIN]:
                del self.buckets[key]
