"""Sweeps: planning runs over client counts × targets, or × the sizes of one pool (a pool the
user picked, or a scratch pool made for the sweep); cancelling a sweep; running one in the
foreground. The resizing between steps and the restoring after are ``sweep_pool``'s."""

from __future__ import annotations

import copy
import os
import uuid
from collections.abc import Sequence
from dataclasses import replace

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, InvalidTransition, RunStatus, Sweep, SweepKind
from benchmarks.services.config import HOSTNAME
from benchmarks.services.enqueue import enqueue_run, kick_next, next_in_line
from benchmarks.services.execute import execute_run
from benchmarks.services.launch import _new_run, validate_run
from benchmarks.services.sweep_pool import restore_pool
from benchmarks.services.targets import ResolvedTarget
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError
from panel.pools.face import services as pools_services
from panel.pools.models import ConnectionPool, PoolMode

MAX_POOL_SIZES = 10
SCRATCH_PREFIX = "sweep-"


def check_pool_sizes(cluster: Cluster, sizes: Sequence[int], pool: ConnectionPool | None) -> None:
    """Every size must fit the cluster's connection budget beside the other pools (the rule
    ``update_pool`` applies at each step); a ServiceError on the ``pool_sizes`` field otherwise."""
    if not sizes:
        raise ServiceError(
            N_("Give at least one pool size, e.g. 2,5,10,20."),
            field="pool_sizes",
            code="sweep.pool_sizes_missing",
            params={},
        )
    if len(sizes) > MAX_POOL_SIZES:
        raise ServiceError(
            N_("At most %(n)s pool sizes."),
            field="pool_sizes",
            code="sweep.pool_sizes_too_many",
            params={"n": MAX_POOL_SIZES},
        )
    if min(sizes) < 1:
        raise ServiceError(
            N_("Pool sizes must be at least 1."),
            field="pool_sizes",
            code="sweep.pool_size_invalid",
            params={},
        )
    used, total = pools_services.pool_budget(cluster)
    left = max(total - (used - (pool.size if pool is not None else 0)), 0)
    too_big = [size for size in sizes if size > left]
    if too_big:
        raise ServiceError(
            N_(
                "Only %(left)s of the cluster's %(total)s connections are left for this pool beside "
                "the other pools: %(sizes)s does not fit."
            ),
            field="pool_sizes",
            code="sweep.pool_size_over_budget",
            params={"left": left, "total": total, "sizes": ", ".join(str(size) for size in too_big)},
        )


def _threads_for(options: cmd.RunOptions, clients: int, cpus: int | None) -> int:
    engine = engines.engine_for(options.engine)  # sysbench drives each client from a thread of its own
    return engine.threads_for(clients, cpus) if engine is not None else cmd.default_threads(clients, cpus)


def _make_scratch_pool(cluster: Cluster, database: str | None, size: int) -> ConnectionPool:
    name = f"{SCRATCH_PREFIX}{uuid.uuid4().hex[:8]}"
    return pools_services.create_pool(
        cluster, name, database or cluster.default_database, None, PoolMode.TRANSACTION, size
    )


@on_node(timeout=120)
def launch_sweep(
    cluster: Cluster,
    *,
    clients_list: Sequence[int],
    pools: Sequence[ConnectionPool | None] = (),
    repeats: int,
    base_options: cmd.RunOptions,
    database: str | None = None,
    user: str | None = None,
    name: str = "",
    pool_sizes: Sequence[int] = (),
    pool: ConnectionPool | None = None,
    enqueue: bool = True,
) -> Sweep:
    """Plan a sweep's runs, queued in order and executed one after the other.

    Without ``pool_sizes``: client counts × targets (``pools``, ``None`` = direct) × repeats. With
    them: client counts × those sizes of ``pool`` × repeats, sizes outermost (one resize per size);
    ``pool`` None makes a scratch transaction pool on ``database`` that the sweep removes at its end.
    ``enqueue=False``: the caller executes the runs (:func:`execute_sweep`), no worker does.
    """
    sizes = sorted(set(pool_sizes))
    resizes = bool(pool_sizes)
    if not clients_list or not (pools or resizes):
        raise ServiceError(
            N_("Give at least one client count and one target."),
            field="clients_list",
            code="sweep.plan_empty",
            params={},
        )
    if not 1 <= repeats <= 20:
        raise ServiceError(
            N_("Repeats must be between 1 and 20."), field="repeats", code="sweep.repeats_range", params={}
        )
    if resizes:
        check_pool_sizes(cluster, sizes, pool)
        busy = Sweep.objects.filter(
            cluster=cluster, kind=SweepKind.POOL_SIZES, pool_name=pool.name if pool else "", restored_at=None
        )
        if pool is not None and busy.exists():
            raise ServiceError(
                N_("Another pool-size sweep is resizing the pool “%(name)s”; wait for it to end."),
                field="pool",
                code="sweep.pool_busy",
                params={"name": pool.name},
            )
    cpus = os.cpu_count()
    scratch = None
    if resizes and pool is None:
        validate_run(cluster, pool=None, database=database, user=user, options=base_options)
        scratch = pool = _make_scratch_pool(cluster, database, sizes[0])
    try:
        return _record_sweep(
            cluster,
            clients_list=clients_list,
            pools=[pool] if resizes else list(pools),
            sizes=sizes if resizes else [None],
            repeats=repeats,
            base_options=base_options,
            database=database,
            user=user,
            name=name,
            cpus=cpus,
            scratch=scratch is not None,
            enqueue=enqueue,
        )
    except BaseException:
        if scratch is not None:
            pools_services.delete_pool(scratch)
        raise


def _record_sweep(
    cluster: Cluster,
    *,
    clients_list: Sequence[int],
    pools: Sequence[ConnectionPool | None],
    sizes: Sequence[int | None],
    repeats: int,
    base_options: cmd.RunOptions,
    database: str | None,
    user: str | None,
    name: str,
    cpus: int | None,
    scratch: bool,
    enqueue: bool,
) -> Sweep:
    plan: list[tuple[ResolvedTarget, cmd.RunOptions, int | None]] = []
    for size in sizes:  # [None] unless the sweep resizes its pool
        for clients in clients_list:
            options = replace(
                base_options, clients=clients, threads=_threads_for(base_options, clients, cpus)
            )
            for target_pool in pools:
                target = validate_run(
                    cluster, pool=target_pool, database=database, user=user, options=options
                )
                if size is not None and target.pool is not None:
                    # The step's size, for its warnings (the pool row changes when the step runs).
                    sized = copy.copy(target.pool)
                    sized.size = size
                    target = replace(target, pool=sized)
                plan.extend((target, options, size) for _repeat in range(repeats))
    resized = pools[0] if sizes[0] is not None else None
    with transaction.atomic():
        sweep = Sweep.objects.create(
            cluster=cluster,
            name=name,
            kind=SweepKind.POOL_SIZES if resized else SweepKind.TARGETS,
            clients_list=list(clients_list),
            targets=[{"kind": "pool", "pool": p.name} if p else {"kind": "direct"} for p in pools],
            pool_sizes=list(sizes) if resized else [],
            pool_name=resized.name if resized else "",
            original_pool_size=resized.size if resized and not scratch else None,
            scratch_pool=scratch,
            repeats=repeats,
            base_options=base_options.to_json(),
        )
        created = timezone.now()
        for index, (target, options, size) in enumerate(plan):
            label = ""
            if size is not None:
                label = _("%(clients)s clients → pool %(name)s of %(size)s") % {
                    "clients": options.clients,
                    "name": resized.name if resized else "",
                    "size": size,
                }
            run = _new_run(
                cluster, target, options, None, sweep=sweep, sweep_index=index, label=label,
                foreground=not enqueue,
            )  # fmt: skip
            # One instant for all: the queue orders them by index.
            BenchmarkRun.objects.filter(pk=run.pk).update(created_at=created, pool_size=size)
    if enqueue:
        try:
            if not BenchmarkRun.objects.filter(cluster=cluster, status=RunStatus.RUNNING).exists():
                first = next_in_line(cluster.pk)
                if first is not None:
                    enqueue_run(first)
        except ServiceError:
            sweep.runs.all().delete()
            sweep.delete()
            raise
    return sweep


# --- the user's actions --------------------------------------------------------------------------


@on_node(timeout=60)
def cancel_sweep(sweep: Sweep) -> int:
    """Cancel every queued or running run of a sweep (the running one's process is stopped within
    2 s), then restore its pool. How many runs were cancelled."""
    cancelled = 0
    for run in sweep.runs.filter(status__in=RunStatus.ACTIVE).order_by("-sweep_index"):
        try:
            run.cancel()
        except InvalidTransition:
            continue
        cancelled += 1
        run.refresh_from_db(fields=["pgbench_pid", "worker_hostname"])
        if run.worker_hostname in ("", HOSTNAME):
            runner.kill_group(run.pgbench_pid, grace_s=1.5)
    sweep.refresh_from_db()
    restore_pool(sweep)
    kick_next(sweep.cluster_id)
    return cancelled


def execute_sweep(sweep: Sweep, *, wait_turn_s: float) -> Sweep:
    """Execute a sweep's runs here, in order (``bench sweep --wait``); the last restores its pool."""
    for run_id in sweep.runs.order_by("sweep_index").values_list("pk", flat=True):
        execute_run(run_id, wait_turn_s=wait_turn_s)
    sweep.refresh_from_db()
    restore_pool(sweep)  # in case every run had already ended (cancelled) before this call
    sweep.refresh_from_db()
    return sweep
