"""How long a node's periodic rounds take: each round (a reconciler round, a metrics collection)
records when it began and its duration on this process's node as it ends, also when it failed,
so the Nodes page can say whether the node keeps up with the round's period."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from panel.clusters.models import CycleKind, Node, NodeCycle

log = logging.getLogger(__name__)


@contextmanager
def timed(kind: CycleKind) -> Iterator[None]:
    """Time the round run inside, and record it when it ends."""
    started = timezone.now()
    clock = time.monotonic()
    try:
        yield
    finally:
        record(kind, started, time.monotonic() - clock)


def record(kind: CycleKind, started: dt.datetime, seconds: float) -> None:
    """This node's last round of ``kind``; nothing when the node has no row (a panel process
    that is no node's agent) or the database does not answer (the round's own work counts more
    than its timing)."""
    try:
        node = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
        if node is None:
            return
        cycle, _created = NodeCycle.objects.update_or_create(
            node=node, kind=kind, defaults={"started_at": started, "seconds": max(0.0, seconds)}
        )
    except DatabaseError:
        log.warning("node %s: the %s round's duration was not recorded", settings.PANEL_NODE_NAME, kind)
        return
    if cycle.is_slow:
        log.warning(
            "node %s: a %s round took %.1f s, longer than its %s s period",
            node.name,
            kind,
            seconds,
            cycle.period,
        )


def last_cycles() -> dict[tuple[int, str], NodeCycle]:
    """Every node's last round of each kind, by (node id, kind)."""
    return {(cycle.node_id, cycle.kind): cycle for cycle in NodeCycle.objects.all()}
