"""The Prometheus exposition of the latest stored figures (``/metrics``).

A custom collector on a private registry reads the last collection of every cluster at scrape
time; nothing is kept in process memory, so any web worker answers the same.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import QuerySet
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from panel.clusters.models import Cluster, ClusterStatus
from panel.insights import services
from panel.insights.lib.metrics import CATALOGUE, split_label

PREFIX = "pgpanel_"
# Stored label keys → Prometheus label names.
LABEL_NAMES = {
    "db": "database",
    "pool": "pool",
    "state": "state",
    "user": "user",
    "source": "source",
    "member": "member",
}


class PanelCollector(Collector):
    """One gauge family per stored metric, one sample per cluster and label value (of every
    cluster, or of ``clusters`` only: a tenant's scrape endpoint)."""

    def __init__(self, clusters: QuerySet[Cluster] | None = None) -> None:
        self.clusters = Cluster.objects.all() if clusters is None else clusters

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families: dict[str, GaugeMetricFamily] = {}
        clusters = self.clusters.exclude(status=ClusterStatus.CREATING).order_by("name")
        for cluster, last in services.latest_of(clusters):
            if last.at is None or last.stale:
                continue  # no invented values: a cluster not collected lately has no samples
            for (metric, labels), value in sorted(last.values.items()):
                info = CATALOGUE.get(metric)
                if info is None:
                    continue
                key = LABEL_NAMES.get(info.label) if info.label else None
                family = families.get(metric)
                if family is None:
                    names = ["cluster", "cluster_id"] + ([key] if key else [])
                    family = GaugeMetricFamily(PREFIX + metric, info.help, labels=names)
                    families[metric] = family
                pair = split_label(labels)
                label_values = [cluster.name, str(cluster.pk)] + ([pair[1] if pair else ""] if key else [])
                family.add_metric(label_values, value, timestamp=last.at.timestamp())
        yield from families.values()


def exposition(clusters: QuerySet[Cluster] | None = None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PanelCollector(clusters))
    return generate_latest(registry)
