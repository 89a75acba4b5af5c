"""Whether a run fits the server's free connection slots, counted before it starts.

A benchmark never closes the pools' server connections to make room (production traffic through a
pool would notice its servers gone): a run that does not fit beside them is refused, at launch and
again when it starts, with how many connections are free and how many the pools hold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services.config import heartbeat_interval, run_margin
from benchmarks.services.targets import ResolvedTarget
from panel.clusters.models import Cluster
from panel.core.errors import N_, Count, ServiceError
from panel.pools.face import ServerRoom
from panel.pools.face import services as pools_services


@dataclass(frozen=True)
class RoomShortage:
    """A run that does not fit: what it needs, what is free, and the clients that would fit."""

    needed: int
    free: int
    limit: int
    held: int
    fit: int


def shortage(room: ServerRoom, target: ResolvedTarget, clients: int) -> RoomShortage | None:
    """None when the run fits. A direct run opens one server connection per client; a run through
    a pool makes the pool open up to its size, less the servers it already holds (clients beyond
    the size wait in PgBouncer and take no slot)."""
    if target.pool is None:
        needed = clients
        own = 0
    else:
        own = room.held_by_pool.get(target.pool.name, 0)
        needed = max(min(clients, target.pool.size) - own, 0)
    if needed <= room.free:
        return None
    return RoomShortage(needed=needed, free=room.free, limit=room.limit, held=room.held, fit=room.free + own)


def shortage_error(found: RoomShortage) -> ServiceError:
    """The refusal beside the client count: how many are free, what the pools hold, what fits."""
    params = {
        "needed": Count(found.needed),
        "free": Count(found.free),
        "limit": Count(found.limit),
        "held": Count(found.held),
        "fit": Count(found.fit),
        "timeout": settings.PANEL_POOL_SERVER_IDLE_TIMEOUT,
    }
    if found.fit > 0 and found.held > 0:
        template = N_(
            "Only %(free)s of the server's %(limit)s connections are free, and this run needs %(needed)s. "
            "The connection pools hold %(held)s of the connections in use; choose at most %(fit)s "
            "clients, or lower a pool's size."
        )
    elif found.fit > 0:
        template = N_(
            "Only %(free)s of the server's %(limit)s connections are free, and this run needs "
            "%(needed)s; choose at most %(fit)s clients."
        )
    elif found.held > 0:
        template = N_(
            "None of the server's %(limit)s connections is free, and this run needs %(needed)s; the "
            "connection pools hold %(held)s of them. Lower a pool's size, or try again once their idle "
            "server connections have closed (after %(timeout)s s idle)."
        )
    else:
        template = N_(
            "None of the server's %(limit)s connections is free, and this run needs %(needed)s; try "
            "again once other clients have disconnected."
        )
    return ServiceError(template, field="clients", code="run.connections_full", params=params)


def require_room(cluster: Cluster, target: ResolvedTarget, clients: int) -> None:
    """Refuse (ServiceError on the ``clients`` field) a run that does not fit the free slots now.
    A server that does not answer is not refused here: the run's own connection says why."""
    room = pools_services.server_room(cluster)
    found = shortage(room, target, clients) if room is not None else None
    if found is not None:
        raise shortage_error(found)


def wait_for_room(run: BenchmarkRun, target: ResolvedTarget, clients: int) -> None:
    """Before a queued run starts: the slots are counted again. While the pools hold servers, wait
    for PgBouncer to close its idle ones on its own (``server_idle_timeout``; a sweep's direct step
    after a pool step), never closing them; then refuse as at launch."""
    deadline = time.monotonic() + min(settings.PANEL_POOL_SERVER_IDLE_TIMEOUT + 5, run_margin() / 2)
    next_beat = 0.0
    while True:
        room = pools_services.server_room(run.cluster)
        found = shortage(room, target, clients) if room is not None else None
        if found is None:
            return
        if found.held == 0 or time.monotonic() >= deadline:
            raise shortage_error(found)
        if not BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists():
            return  # cancelled meanwhile: the executor sees it next
        if time.monotonic() >= next_beat:
            next_beat = time.monotonic() + heartbeat_interval()
            BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                heartbeat_at=timezone.now()
            )
        time.sleep(1.0)
