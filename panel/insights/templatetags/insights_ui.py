"""``{% firing_alerts cluster as alerts %}``: the banner of every cluster page, with no view's help;
``{% run_queries_url cluster run as url %}``: the Queries tab over a benchmark run's window."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.models import AlertRule
from panel.insights.services import queries

register = template.Library()


@register.simple_tag
def firing_alerts(cluster: Cluster) -> list[AlertRule]:
    return services.firing_alerts(cluster)


@register.simple_tag
def run_queries_url(cluster: Cluster, run: Any) -> str:
    """The Queries tab from the run's start to the first collection after its end ("" before it
    started)."""
    if getattr(run, "started_at", None) is None:
        return ""
    window = queries.run_window(run.started_at, run.finished_at)
    query = urlencode({"start": window.start.isoformat(), "end": window.end.isoformat()})
    return f"{reverse('insights:queries', args=[cluster.pk])}?{query}"
