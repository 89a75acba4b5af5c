"""Small presentation helpers shared by the cluster pages."""

from __future__ import annotations

from typing import Any

from django import template

from panel.clusters.models import Cluster, ClusterStatus

register = template.Library()

STATUS_COLORS = {
    ClusterStatus.ONLINE: "success",
    ClusterStatus.DEGRADED: "warning",
    ClusterStatus.STOPPED: "secondary",
    ClusterStatus.CREATING: "info",
    ClusterStatus.STARTING: "info",
    ClusterStatus.STOPPING: "info",
    ClusterStatus.ERROR: "danger",
    ClusterStatus.DELETING: "danger",
}


@register.inclusion_tag("clusters/_status_badge.html")
def status_badge(cluster: Cluster) -> dict[str, Any]:
    return {
        "status": cluster.status,
        "label": cluster.get_status_display(),
        "color": STATUS_COLORS.get(cluster.status, "secondary"),
        "busy": cluster.is_busy,
    }
