"""Clusters, the nodes that hold them, their roles and databases, their trusted sources and the
events shown on a cluster page: one module each, all importable from here."""

from panel.clusters.models.clusters import (
    STATUS_WORDS,
    Cluster,
    ClusterKind,
    ClusterQuerySet,
    ClusterStatus,
    status_word,
)
from panel.clusters.models.events import ClusterEvent, EventLevel
from panel.clusters.models.firewall import TrustedSource
from panel.clusters.models.nodes import Node, NodeState
from panel.clusters.models.roles import Database, DatabaseUser

__all__ = [
    "STATUS_WORDS",
    "Cluster",
    "ClusterEvent",
    "ClusterKind",
    "ClusterQuerySet",
    "ClusterStatus",
    "Database",
    "DatabaseUser",
    "EventLevel",
    "Node",
    "NodeState",
    "TrustedSource",
    "status_word",
]
