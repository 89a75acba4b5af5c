"""A cluster's entry point on a node other than its own: the ports its clients come in on there."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from panel.clusters.models.nodes import Node


class ClusterEntry(models.Model):
    """HAProxy of a cluster with standbys on a node that holds one of its members but is not the
    cluster's node (which serves ``Cluster.port``, ``standby_port`` and ``pooler_port``): the
    read-write port, the read-only port and the pools' port there, in that node's range. Clients given every entry (the multi-host
    connection details) reach whichever member leads as long as one entry's node is up. The row
    is made by that node's agent the first time it serves the entry, and goes with the last member
    of the cluster there."""

    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="entries")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="entries")
    port = models.PositiveIntegerField()
    standby_port = models.PositiveIntegerField()
    # PgBouncer of the cluster's pools on this node (the pools app's ``entries``), reaching the
    # primary through this entry's HAProxy.
    pooler_port = models.PositiveIntegerField()

    class Meta:
        ordering = ("cluster", "node__name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "node"), name="entry_one_per_cluster_and_node"),
            models.UniqueConstraint(fields=("node", "port"), name="entry_port_unique_per_node"),
            models.UniqueConstraint(
                fields=("node", "standby_port"), name="entry_standby_port_unique_per_node"
            ),
            models.CheckConstraint(condition=~Q(port=models.F("standby_port")), name="entry_ports_differ"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster.name}@{self.node.name}"
