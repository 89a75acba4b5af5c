"""Small presentation helpers shared by the cluster pages."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.translation import gettext

from panel.clusters import hooks
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import lifecycle
from panel.clusters.standbys.services import ha_health
from panel.core.errors import shown_text

register = template.Library()

STATUS_COLORS: dict[str, str] = {
    ClusterStatus.ONLINE: "success",
    ClusterStatus.DEGRADED: "warning",
    ClusterStatus.STOPPED: "secondary",
    ClusterStatus.CREATING: "info",
    ClusterStatus.STARTING: "info",
    ClusterStatus.STOPPING: "info",
    ClusterStatus.ERROR: "danger",
    ClusterStatus.DELETING: "danger",
    ClusterStatus.RESIZING: "info",
}


@register.inclusion_tag("clusters/_status_badge.html")
def status_badge(cluster: Cluster, full: set[Any] | None = None) -> dict[str, Any]:
    """``full``: which clusters of a list are full, asked once for the list (else per cluster)."""
    if cluster.status_unknown:
        # Its node's agent stopped answering: the row's status may no longer be true.
        assert cluster.node is not None  # status_unknown: the cluster has a node
        return {
            "status": "unknown",
            "label": gettext("Unknown"),
            "color": "dark",
            "busy": False,
            "title": gettext("Node “%(node)s” has not answered since %(when)s (UTC).")
            % {
                "node": cluster.node.name,
                "when": cluster.node.last_heartbeat.strftime("%Y-%m-%d %H:%M:%S")
                if cluster.node.last_heartbeat
                else gettext("it was added"),
            },
        }
    if cluster.status == ClusterStatus.ONLINE and (
        cluster.pk in full if full is not None else hooks.disk_full(cluster)
    ):
        return {
            "status": "disk-full",
            "label": gettext("Disk full"),
            "color": "danger",
            "busy": False,
            "title": gettext(
                "Read-only: the disk is nearly full. Delete data (DELETE then VACUUM, TRUNCATE, DROP) "
                "or resize to a larger plan."
            ),
        }
    if cluster.status == ClusterStatus.CREATING and cluster.is_replica:
        # The managed service's word for a read-only node being made from its source.
        return {"status": "forking", "label": gettext("Forking"), "color": "info", "busy": True}
    why = ha_health.detail(cluster)
    return {
        "status": cluster.status,
        "label": cluster.get_status_display(),
        "color": STATUS_COLORS.get(cluster.status, "secondary"),
        "busy": cluster.is_busy,
        "title": str(why) if why else "",
    }


@register.simple_tag
def degraded_detail(cluster: Cluster) -> str:
    """Which member keeps a cluster with standbys degraded, in the reader's language ("": none)."""
    why = ha_health.detail(cluster)
    return str(why) if why else ""


@register.filter
def in_words(text: str) -> str:
    """A cluster's kept message (its last error) in the reader's language; older text as it is."""
    return shown_text(text or "")


@register.simple_tag
def cluster_actions(cluster: Cluster) -> list[str]:
    """What the Actions menu offers: the actions the cluster's status allows (services/lifecycle)."""
    return lifecycle.available_actions(cluster)
