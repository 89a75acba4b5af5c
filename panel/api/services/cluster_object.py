"""The cluster object complete, field by field as the managed service's v2 API has it: the base
fields (``databases.database``) and the managed service's others, from the apps' rows:
``private_connection`` (the node's private address, else the public one), the standby
connections (HAProxy's read-only port; null for one member); docs/managed-api.md says what each
field means here."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.db.models import QuerySet

from panel.api.services import databases, resources
from panel.clusters.face import host_of
from panel.clusters.models import Cluster
from panel.managed.face import create as managed_create
from panel.managed.face import maintenance, tags
from panel.managed.lib.updates import DAYS

# PostgreSQL's own support policy: each major is supported five years from its first release
# (postgresql.org/support/versioning); the date is its final minor release's.
END_OF_LIFE = {
    "12": "2024-11-21",
    "13": "2025-11-13",
    "14": "2026-11-12",
    "15": "2027-11-11",
    "16": "2028-11-09",
    "17": "2029-11-08",
}


def maintenance_window(cluster: Cluster) -> dict[str, Any]:
    row = maintenance.window_of(cluster)
    waiting = maintenance.pending(row)
    return {
        "day": row.day if row.day in DAYS else DAYS[-1],
        "hour": f"{row.hour:02d}:00:00",
        "pending": bool(waiting),
        "description": [str(item) for item in waiting],
    }


def metrics_endpoints(base_url: str | None) -> list[dict[str, Any]]:
    """Where the scrape endpoints are served: the panel's own address (the one the API was called
    on); the path is ``/metrics/clusters/<id>`` (docs/managed-api.md)."""
    if not base_url:
        return []
    parts = urlsplit(base_url)
    if not parts.hostname:
        return []
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return [{"host": parts.hostname, "port": port}]


def rules(cluster: Cluster) -> list[dict[str, Any]]:
    return [
        {
            "uuid": str(source.pk),
            "cluster_uuid": str(cluster.pk),
            "type": "ip_addr",
            "value": source.value,
            "created_at": source.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        for source in sorted(cluster.trusted_sources.all(), key=lambda row: (row.created_at, row.value))
    ]


def standby(cluster: Cluster, *, with_password: bool, private: bool) -> dict[str, Any] | None:
    """The standby connection object (the managed service's ``replica-`` host): null for a
    cluster without standbys."""
    if not (cluster.num_nodes > 1 and cluster.standby_port):
        return None
    return databases.connection(cluster, with_password=with_password, standby=True, private=private)


def listed(clusters: QuerySet[Cluster]) -> QuerySet[Cluster]:
    """``clusters`` with what :func:`full` reads of each fetched along, a few queries for a whole
    page instead of a dozen a cluster (issue 41: the list ≤ 100 ms with 200 clusters)."""
    return clusters.select_related("node", "maintenance").prefetch_related(
        "users__replication", "databases", "tags", "trusted_sources", "entries__node"
    )


def full(cluster: Cluster, *, with_password: bool, base_url: str | None = None) -> dict[str, Any]:
    """One cluster as the managed service's complete ``database`` object."""
    body = databases.database(cluster, with_password=with_password)
    row = maintenance.window_of(cluster)
    body.update(
        {
            "private_connection": databases.connection(cluster, with_password=with_password, private=True),
            # Reads served by a standby (HAProxy's read-only port); null without standbys.
            "standby_connection": standby(cluster, with_password=with_password, private=False),
            "standby_private_connection": standby(cluster, with_password=with_password, private=True),
            # The operator's floating address (the primary's node's, moved by the panel's follower); null: none.
            "floating_address": host_of(cluster.floating_address) or None,
            "users": [
                resources.user(user, with_password=with_password)
                for user in sorted(cluster.users.all(), key=lambda row: (row.created_at, row.name))
            ],
            "db_names": [
                row.name
                for row in sorted(cluster.databases.all(), key=lambda row: (row.created_at, row.name))
            ],
            "tags": tags.tags_of(cluster),
            "maintenance_window": maintenance_window(cluster),
            "semantic_version": row.postgres_running or cluster.version,
            "version_end_of_life": END_OF_LIFE.get(cluster.version),
            "version_end_of_availability": None,
            "private_network_uuid": None,
            "project_id": None,
            "rules": rules(cluster),
            "storage_size_mib": managed_create.storage_mib(cluster.plan_slug),
            "metrics_endpoints": metrics_endpoints(base_url) if cluster.is_local else [],
        }
    )
    return body


def create(owner: Any, payload: Any) -> Cluster:
    """The create call: ``engine``, ``num_nodes`` and ``region`` as before, then the cluster made
    with its tags, trusted sources and storage checked first."""
    databases.check_create(engine=payload.engine, num_nodes=payload.num_nodes, region=payload.region)
    sources = []
    for index, rule in enumerate(payload.rules or []):
        if rule.type != "ip_addr":
            databases.refuse_rule_type(index, rule.type)
        sources.append(rule.value)
    return managed_create.create_managed(
        owner,
        name=payload.name,
        plan_slug=payload.size,
        version=payload.version,
        node=payload.region or None,
        tags=payload.tags or [],
        sources=sources,
        storage_size_mib=payload.storage_size_mib,
        num_nodes=payload.num_nodes,
    )
