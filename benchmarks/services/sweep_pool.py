"""The pool of a pool-size sweep: resized before each step, given back after the last.

The pool changes through the pools app's own ``update_pool`` (its budget check, its validated
atomic write and online RELOAD, never a restart), from the process that executes the step: the node
agent's worker, or ``bench sweep --wait``. Once no run of the sweep is left to execute (finished,
failed, cancelled, or failed by the reaper) the pool gets its original size back, or the scratch
pool the sweep made is removed, once: under the sweep row's lock, ``restored_at`` stamped when done.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from benchmarks.models import BenchmarkRun, RunStatus, Sweep, SweepKind
from panel.clusters.models import Cluster
from panel.core.errors import N_, ServiceError
from panel.core.polling import wait_for
from panel.pools.face import admin_console, console
from panel.pools.face import services as pools_services
from panel.pools.lib.admin_console import pool_totals
from panel.pools.models import ConnectionPool

log = logging.getLogger(__name__)

# How long a step waits for PgBouncer to close a shrunk pool's servers beyond its new size.
TRIM_TIMEOUT_S = 5.0


def _served_size(cluster: Cluster, name: str) -> int | None:
    """The ``pool_size`` PgBouncer itself reports for a pool (SHOW DATABASES), None if absent."""
    with admin_console(cluster) as conn:
        for row in console.show_databases(conn):
            if row.name == name:
                return row.pool_size
    return None


def _held(cluster: Cluster, name: str) -> int:
    with admin_console(cluster) as conn:
        totals = pool_totals(console.show_pools(conn)).get(name)
    return totals.servers_active + totals.servers_idle if totals else 0


def _trim(run: BenchmarkRun, pool: ConnectionPool) -> None:
    """A smaller size applies as PgBouncer closes the servers beyond it. The sweep's scratch pool
    is the benchmark's own: its idle servers are closed at once. A tenant's pool keeps its servers
    (traffic through it would notice them closed): PgBouncer's own upkeep closes only those beyond
    the new size, which this waits for."""
    if run.sweep is not None and run.sweep.scratch_pool:
        pools_services.release_pool(pool)
        return
    try:
        wait_for(lambda: _held(run.cluster, pool.name) <= pool.size, TRIM_TIMEOUT_S, interval=0.2)
    except (console.ConsoleError, ValueError) as exc:
        log.info("sweep %s: counting the servers of %s failed: %s", run.sweep_id, pool.name, exc)


def prepare_step(run: BenchmarkRun) -> None:
    """Give the pool of a pool-size sweep's step the step's size, online, before it runs, and
    record the size PgBouncer then serves. Runs where the step executes (the node). Raises
    ServiceError (the step fails with it) when the pool is gone or the size does not fit any more."""
    if run.pool_size is None or not run.pool_name:
        return
    pool = ConnectionPool.objects.filter(cluster_id=run.cluster_id, name=run.pool_name).first()
    if pool is None:
        raise ServiceError(
            N_("The pool “%(name)s” no longer exists."), code="pool.not_found", params={"name": run.pool_name}
        )
    shrinking = run.pool_size < pool.size
    if pool.size != run.pool_size:
        pool = pools_services.update_pool(pool, pool.database, pool.user or None, pool.mode, run.pool_size)
    if shrinking:
        _trim(run, pool)
    try:
        served = _served_size(run.cluster, pool.name)
    except (console.ConsoleError, ValueError) as exc:
        raise ServiceError(
            N_("PgBouncer did not answer SHOW DATABASES: %(e)s"),
            code="sweep.pooler_silent",
            params={"e": exc},
        ) from None
    BenchmarkRun.objects.filter(pk=run.pk).update(pool_size_applied=served)
    run.pool_size_applied = served
    if served != run.pool_size:
        raise ServiceError(
            N_("PgBouncer serves the pool “%(name)s” with %(served)s connections, not %(size)s."),
            code="sweep.pool_size_not_applied",
            params={"name": pool.name, "served": served, "size": run.pool_size},
        )


def restore_pool(sweep: Sweep) -> bool:
    """Once no run of a pool-size sweep is left to execute: its pool's original size back, or its
    scratch pool removed. Once per sweep (under the sweep row's lock, ``restored_at`` stamped when
    done); a failure is stored on the sweep (the page shows it). Whether this call did it."""
    if not sweep.resizes_pool or sweep.restored_at is not None:
        return False
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().filter(pk=sweep.pk, restored_at__isnull=True).first()
        if locked is None or locked.runs.filter(status__in=RunStatus.ACTIVE).exists():
            return False
        error = ""
        try:
            _give_back(locked)
        except ServiceError as exc:
            log.warning("sweep %s: could not restore pool %s: %s", sweep.pk, sweep.pool_name, exc.message)
            error = exc.message
        Sweep.objects.filter(pk=sweep.pk).update(restored_at=timezone.now(), restore_error=error)
    sweep.refresh_from_db()
    return True


def _give_back(sweep: Sweep) -> None:
    pool = ConnectionPool.objects.filter(cluster_id=sweep.cluster_id, name=sweep.pool_name).first()
    if pool is None:
        return  # deleted meanwhile: nothing to give back
    if sweep.scratch_pool:
        pools_services.delete_pool(pool)
    elif sweep.original_pool_size is not None and pool.size != sweep.original_pool_size:
        pools_services.update_pool(
            pool, pool.database, pool.user or None, pool.mode, sweep.original_pool_size
        )


def restore_finished_sweeps() -> list[str]:
    """The reaper's part: restore the pools of pool-size sweeps whose last run ended without its
    executor doing it (a lost worker)."""
    notes = []
    here = Cluster.objects.here().values("pk")
    waiting = Sweep.objects.filter(
        kind=SweepKind.POOL_SIZES, restored_at__isnull=True, cluster__in=here
    ).exclude(runs__status__in=RunStatus.ACTIVE)
    for sweep in waiting:
        if restore_pool(sweep):
            notes.append(f"sweep {sweep.pk}: pool {sweep.pool_name} restored")
    return notes


def after_run(run: BenchmarkRun) -> None:
    """What the executor does when a run of a sweep ends: the last one restores the sweep's pool."""
    if run.sweep_id is None:
        return
    sweep = Sweep.objects.filter(pk=run.sweep_id).first()
    if sweep is not None:
        restore_pool(sweep)
