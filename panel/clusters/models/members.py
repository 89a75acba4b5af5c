"""The servers of a cluster with standbys, run by Patroni: one row per member."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel.clusters.models.nodes import Node


class MemberRole(models.TextChoices):
    PRIMARY = "primary", _("Primary")
    STANDBY = "standby", _("Standby")
    UNKNOWN = "unknown", _("Unknown")


class ClusterMember(models.Model):
    """One PostgreSQL server of a cluster with standbys, run by Patroni: its own data directory,
    port and Patroni REST port on a node. Role, state, lag and timeline are what Patroni said last
    (the node agent's poll or a callback writes them)."""

    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="members")
    name = models.CharField(max_length=32)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="members")
    port = models.PositiveIntegerField()
    rest_port = models.PositiveIntegerField()
    data_dir = models.CharField(max_length=500)
    role = models.CharField(max_length=16, choices=MemberRole.choices, default=MemberRole.UNKNOWN)
    # Patroni's word for it: running, streaming, starting, stopped, creating replica, …
    state = models.CharField(max_length=32, default="creating")
    lag_bytes = models.BigIntegerField(null=True, blank=True)
    timeline = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    # When it was last seen running (primary) or streaming (standby) with its postmaster up.
    healthy_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("cluster", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "name"), name="member_name_unique_per_cluster"),
            models.UniqueConstraint(fields=("node", "port"), name="member_port_unique_per_node"),
            models.UniqueConstraint(fields=("node", "rest_port"), name="member_rest_port_unique_per_node"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}/{self.name}"

    @property
    def pgdata(self) -> Path:
        return Path(self.data_dir)

    @property
    def host(self) -> str:
        """Where its PostgreSQL and Patroni's REST API listen and are reached: loopback while the
        cluster's members share one node, the member's node's address once they are spread."""
        spread = self.cluster.members.exclude(node_id=self.node_id).exists()
        return self.node.address if spread else "127.0.0.1"

    @property
    def is_remote(self) -> bool:
        """On another node than its cluster's (that node's agent runs its Patroni)."""
        return self.node_id != self.cluster.node_id


# How recent a member's health must be for the member rows to speak for a cluster whose own node
# is silent: the reconciler of a node holding one of its members records them every pass
# (``ha_health.watched_here``; PANEL_RECONCILE_SECONDS, 15 s by default).
WATCH_FRESH_SECONDS = 60


def watched_elsewhere(cluster_id: Any) -> bool:
    """A cluster with standbys whose rows another node keeps true: a member on a node that answers
    was seen healthy within WATCH_FRESH_SECONDS (its own node's agent may be silent)."""
    now = timezone.now()
    return ClusterMember.objects.filter(
        cluster_id=cluster_id,
        healthy_at__gte=now - timedelta(seconds=WATCH_FRESH_SECONDS),
        node__last_heartbeat__gte=now - timedelta(seconds=settings.PANEL_NODE_DEAD_AFTER),
    ).exists()
