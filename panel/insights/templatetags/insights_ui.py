"""``{% firing_alerts cluster as alerts %}``: the banner of every cluster page, with no view's help."""

from __future__ import annotations

from django import template

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.models import AlertRule

register = template.Library()


@register.simple_tag
def firing_alerts(cluster: Cluster) -> list[AlertRule]:
    return services.firing_alerts(cluster)
