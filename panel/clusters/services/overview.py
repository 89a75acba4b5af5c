"""What the cluster page shows: live figures for the overview, and connection details."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from panel.clusters import hooks
from panel.clusters.engine import dbconn, postgres
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster, Database, DatabaseUser
from panel.clusters.standbys.services import entry_points
from panel.core.agent import on_node
from panel.core.errors import N_, ServiceError


@dataclass(frozen=True)
class Overview:
    """Live figures for the overview tab; None where unknown (stopped, unreachable)."""

    data_size_bytes: int | None
    started_at: dt.datetime | None


def overview(cluster: Cluster) -> Overview:
    """The overview's size and start time. While the Insights collector's last collection (every
    15 s) is recent they come from it, read from the database here: a page load neither asks the
    node's agent, nor walks PGDATA, nor connects to an attached server that may not answer, and a
    node that stopped answering still shows what was last known. They are measured on the node
    only when there is none (a cluster just created, the collector not running)."""
    last = hooks.metrics.latest(cluster)
    if not last.stale and cluster.is_serving:
        if cluster.is_local:
            size = last.get("disk_used_bytes")
        else:
            sizes = [value for (metric, _labels), value in last.values.items() if metric == "db_size_bytes"]
            size = sum(sizes) if sizes else None
        started = hooks.metrics.server_started_at(cluster)
        if size is not None and started is not None:
            return Overview(int(size), started)
    if cluster.node_silent:
        return Overview(None, None)  # its agent would not answer
    return measured_overview(cluster)


@on_node(timeout=15)
def measured_overview(cluster: Cluster) -> Overview:
    """The overview's figures measured where the cluster lives (see ``overview``)."""
    last = hooks.metrics.latest(cluster)
    if cluster.is_local:
        started = postgres.started_at(cluster.pgdata)
        if not last.stale:
            size = last.get("disk_used_bytes")
        # While a job rewrites PGDATA, walking its thousands of files costs more than a figure
        # that is stale a moment later; the page fetches its tab again when the job ends.
        elif not cluster.is_busy and cluster.pgdata.exists():
            size = postgres.directory_size(cluster.pgdata)
        else:
            size = None
        return Overview(
            None if size is None else int(size),
            dt.datetime.fromtimestamp(started, dt.UTC) if started else None,
        )
    if not last.stale:
        sizes = [value for (metric, _labels), value in last.values.items() if metric == "db_size_bytes"]
        return Overview(int(sum(sizes)) if sizes else None, hooks.metrics.server_started_at(cluster))
    try:
        with dbconn.monitor_connection(cluster) as conn:
            # pg_database_size() raises for a database the role may not connect to, which
            # would lose the whole figure: count the ones it can see.
            row = conn.execute(
                "SELECT pg_catalog.sum(pg_catalog.pg_database_size(oid))::bigint, "
                "pg_catalog.pg_postmaster_start_time() FROM pg_catalog.pg_database "
                "WHERE pg_catalog.has_database_privilege(oid, 'CONNECT')"
            ).fetchone()
    except (dbconn.DatabaseError, DatabaseUser.DoesNotExist):
        return Overview(None, None)
    return Overview(int(row[0]) if row and row[0] is not None else None, row[1] if row else None)


def _prefetched(cluster: Cluster, relation: str) -> list[Any] | None:
    """The rows of ``relation`` when a list of clusters fetched them beforehand
    (``prefetch_related``: the API's list asks once for a page, not once a cluster), else None."""
    cache = getattr(cluster, "_prefetched_objects_cache", None) or {}
    return list(cache[relation]) if relation in cache else None


def database_user(cluster: Cluster, name: str) -> DatabaseUser:
    """The cluster's user of that name; a ServiceError on the form's user field when there is none."""
    found = _prefetched(cluster, "users")
    try:
        if found is None:
            return cluster.users.get(name=name)
        return next(row for row in found if row.name == name)
    except (DatabaseUser.DoesNotExist, StopIteration):
        raise DatabaseUser.not_found(name, field="user") from None


def connection_details(
    cluster: Cluster,
    *,
    user: str | None = None,
    database: str | None = None,
    standby: bool = False,
    private: bool = False,
    every_entry: bool = True,
) -> ConnectionDetails:
    """The details a client uses; unknown user or database names are a ServiceError.
    ``standby``: the read-only port, served by a standby (a ServiceError without standbys);
    ``private``: the node's private address as the host (the public one when it has none);
    ``every_entry``: a cluster with members on several nodes is reached at its entry on each of
    them (``entry_points``), its own node's first, with ``target_session_attrs`` (``read-write``,
    or ``prefer-standby`` for the read-only port); False: its own node's entry alone."""
    if standby and not cluster.standby_port:
        raise ServiceError(
            N_("%(name)s has no standby nodes: there is no standby connection."),
            field="node",
            code="cluster.no_standby",
            params={"name": cluster.name},
        )
    db_name = database or cluster.default_database
    db_user = database_user(cluster, user or cluster.admin_user)
    databases = _prefetched(cluster, "databases")
    if databases is None:
        known = cluster.databases.filter(name=db_name).exists()
    else:
        known = any(row.name == db_name for row in databases)
    if not known:
        raise Database.not_found(db_name, field="database")
    host = cluster.private_host if private else cluster.public_host
    port = cluster.standby_port if standby else cluster.port
    sslmode = "require" if cluster.is_local else cluster.sslmode
    details = ConnectionDetails(db_user.name, db_user.password, host, int(port or 0), db_name, sslmode)
    return with_entries(details, cluster, standby=standby, private=private) if every_entry else details


def with_entries(
    details: ConnectionDetails, cluster: Cluster, *, standby: bool = False, private: bool = False
) -> ConnectionDetails:
    """``details`` with the cluster's entries on its other member nodes after its own (none: as
    they are)."""
    found = entry_points.entries(cluster, private=private)[1:]
    ports = [(e.host, e.standby_port if standby else e.port) for e in found]
    more = tuple((host, int(port)) for host, port in ports if port)
    if not more:
        return details
    attrs = "prefer-standby" if standby else "read-write"
    return dataclasses.replace(details, more_hosts=more, target_session_attrs=attrs)
