"""The status of a cluster with standbys from the truth: Patroni's word on its members, judged by
``standbys/lib/ha_health.py``. The reconciler asks every pass: a degraded cluster whose members are all
back is online again, an online one with a member missing (past the grace) or lagging is degraded,
each change one event that says which member."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, EventLevel, MemberRole, Node
from panel.clusters.services import transitions
from panel.clusters.standbys.lib import ha_health
from panel.clusters.standbys.services import ha
from panel.core.errors import N_, Message


def views_of(cluster: Cluster) -> list[ha_health.MemberView]:
    """The members as their rows last recorded them."""
    return [
        ha_health.MemberView(m.name, m.role == MemberRole.PRIMARY, m.state, m.lag_bytes, m.healthy_at)
        for m in cluster.members.all()
    ]


def detail(cluster: Cluster) -> Message | None:
    """Why a cluster with standbys is degraded, from its member rows (None: nothing to say)."""
    if not cluster.is_ha or cluster.status != ClusterStatus.DEGRADED:
        return None
    return ha_health.describe(ha_health.problems(views_of(cluster), timezone.now()))


def watched_here() -> list[Cluster]:
    """The clusters with standbys whose own node is silent and whose status this node keeps in its
    place: those with a member here, this node the first (by name) of their members' nodes that
    answer. Their member rows and status stay true (``members.watched_elsewhere``) while their node
    is lost, the failover recorded, and the page says degraded rather than unknown."""
    here = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
    if here is None:
        return []
    watched = []
    candidates = Cluster.objects.filter(
        kind=ClusterKind.LOCAL, status__in=ClusterStatus.SERVING, num_nodes__gt=1, members__node=here
    ).exclude(node=here)
    for cluster in candidates.select_related("node").distinct():
        if not cluster.agent_silent():
            continue
        alive = [node for node in Node.objects.filter(members__cluster=cluster).distinct() if node.is_alive]
        if min(alive, key=lambda node: node.name, default=None) == here:
            watched.append(cluster)
    return watched


def assess(cluster: Cluster) -> list[str]:
    """Read the members from Patroni and set the cluster online or degraded by what they are."""
    if cluster.pk in ha.SWITCHING:  # this process is switching it over: its members move
        return []
    statuses = ha.read_statuses(cluster)
    if statuses:
        # Through refresh_members, not straight into the rows: a change of primary recorded here
        # first (the cluster's node back after a failover elsewhere, its reconciler ahead of its
        # member watch) would leave the watch nothing to see, and the cluster's PgBouncer
        # pointing at the old primary, a standby now, for good (no event, no email either).
        ha.refresh_members(cluster, seen=statuses)
        views = views_of(cluster)
    else:  # no Patroni answered: no member is known to run
        views = [
            ha_health.MemberView(v.name, False, "unknown", None, v.healthy_at) for v in views_of(cluster)
        ]
    found = ha_health.problems(views, timezone.now())
    now = timezone.now()
    if not found:
        if not Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.DEGRADED).update(
            status=ClusterStatus.ONLINE, error_message="", progress=100, progress_message="", updated_at=now
        ):
            return []
        cluster.refresh_from_db()
        transitions.log_event(
            cluster,
            "recovered",
            Message(N_("Every member runs again and the primary accepts writes: online.")),
        )
        return [f"{cluster.name}: online again"]
    why = ha_health.describe(found)
    if why is None or not Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ONLINE).update(
        status=ClusterStatus.DEGRADED, updated_at=now
    ):
        return []
    cluster.refresh_from_db()
    transitions.log_event(cluster, "degraded", why, EventLevel.WARNING)
    return [f"{cluster.name}: degraded ({why})"]
