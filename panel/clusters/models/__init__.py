"""Clusters, the nodes that hold them, their members (standbys), their roles and databases, their
trusted sources and the events shown on a cluster page: one module each, all importable from here.
Functions on a cluster that the engine needs are beside them: ``credentials`` (its secrets in the
clear), ``servers`` (where its server is reached), ``firewall.trusted_source_values``."""

from panel.clusters.models.clusters import MAX_NUM_NODES, MIN_HA_RAM_GB, Cluster, ClusterQuerySet
from panel.clusters.models.entries import ClusterEntry
from panel.clusters.models.etcd import EtcdAuthority, EtcdMember, EtcdMemberState
from panel.clusters.models.events import ClusterEvent, EventLevel
from panel.clusters.models.firewall import TrustedSource
from panel.clusters.models.members import ClusterMember, MemberRole
from panel.clusters.models.nodes import CycleKind, Node, NodeCycle, NodeState
from panel.clusters.models.roles import Database, DatabaseUser
from panel.clusters.models.status import STATUS_WORDS, ClusterKind, ClusterStatus, status_word

__all__ = [
    "MAX_NUM_NODES",
    "MIN_HA_RAM_GB",
    "STATUS_WORDS",
    "Cluster",
    "ClusterEntry",
    "ClusterEvent",
    "ClusterMember",
    "ClusterKind",
    "ClusterQuerySet",
    "ClusterStatus",
    "CycleKind",
    "Database",
    "DatabaseUser",
    "EtcdAuthority",
    "EtcdMember",
    "EtcdMemberState",
    "EventLevel",
    "MemberRole",
    "Node",
    "NodeCycle",
    "NodeState",
    "TrustedSource",
    "status_word",
]
