"""Watching PgBouncer while a run goes through one of its pools: once a second, ``SHOW POOLS`` of
the run's pool and the PgBouncer process's CPU, stored with the run when it ends (``run.pooler``),
for the page to say why a pool run was slower than the direct run (``lib/pooler_load.py``).

Reads only; a sample PgBouncer does not answer is skipped, never a reason to stop the run.
"""

from __future__ import annotations

import logging
import time

import psutil

from benchmarks.lib.pooler_load import PoolerSample, summarize
from benchmarks.models import BenchmarkRun
from panel.pools.face import admin_console, bouncer_files, console, supervisor
from panel.pools.lib.admin_console import pool_totals
from panel.pools.models import ConnectionPool

log = logging.getLogger(__name__)

INTERVAL_S = 1.0
# An hour of samples at most: a longer run keeps its first hour (the summary is over those).
MAX_SAMPLES = 3600


class PoolerWatch:
    """The samples of one run's pool, taken by the executor's loop (``tick``) and stored by ``save``."""

    def __init__(self, run: BenchmarkRun, pool: ConnectionPool) -> None:
        self.run = run
        self.pool_name = pool.name
        self.pool_size = pool.size
        self.started = time.monotonic()
        self.next_at = self.started + INTERVAL_S
        self.samples: list[PoolerSample] = []
        self.process: psutil.Process | None = None
        pid = supervisor.running_pid(bouncer_files(run.cluster))
        if pid is not None:
            try:
                self.process = psutil.Process(pid)
                self.process.cpu_percent(None)  # the first call only starts the measurement
            except psutil.Error:
                self.process = None

    @classmethod
    def for_run(cls, run: BenchmarkRun) -> PoolerWatch | None:
        if not run.pool_name:
            return None
        pool = ConnectionPool.objects.filter(cluster_id=run.cluster_id, name=run.pool_name).first()
        return cls(run, pool) if pool is not None else None

    def tick(self) -> None:
        now = time.monotonic()
        if now < self.next_at or len(self.samples) >= MAX_SAMPLES:
            return
        self.next_at = now + INTERVAL_S
        try:
            with admin_console(self.run.cluster) as conn:
                totals = pool_totals(console.show_pools(conn)).get(self.pool_name)
        except (console.ConsoleError, ValueError) as exc:
            log.info("run %s: SHOW POOLS failed: %s", self.run.pk, exc)
            return
        if totals is None:
            return
        self.samples.append(
            PoolerSample(
                elapsed_s=round(now - self.started, 2),
                cl_active=totals.cl_active,
                cl_waiting=totals.cl_waiting,
                maxwait_s=totals.maxwait,
                sv_active=totals.servers_active,
                cpu_percent=self._cpu(),
            )
        )

    def _cpu(self) -> float | None:
        """PgBouncer's CPU since the last sample, percent of one core (it runs on one)."""
        if self.process is None:
            return None
        try:
            return round(self.process.cpu_percent(None), 1)
        except psutil.Error:
            self.process = None
            return None

    def save(self) -> None:
        pooler = {
            "pool_size": self.pool_size,
            "clients": self.run.clients,
            "samples": [sample.to_json() for sample in self.samples],
            "summary": summarize(self.samples),
        }
        BenchmarkRun.objects.filter(pk=self.run.pk).update(pooler=pooler)
        self.run.pooler = pooler
