"""What the API's database responses are made of, from the clusters' own rows and services:
a cluster in the managed service's shape, a page of them, and the options for a new one."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db.models import QuerySet

from panel.clusters.face import services as cluster_services
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.lib.plans import PLANS
from panel.clusters.models import MAX_NUM_NODES, MIN_HA_RAM_GB, Cluster, Node, NodeState
from panel.core.errors import N_, ServiceError

ENGINE = "pg"


def connection(
    cluster: Cluster, *, with_password: bool, standby: bool = False, private: bool = False
) -> dict[str, Any]:
    """The connection object of a cluster (doadmin on the default database), never null: clients
    dereference it without a check, so a cluster still being made gets its fields without a
    password. ``standby``: the read-only port (the caller checks there is one); ``private``: the
    node's private address."""
    try:
        details = cluster_services.connection_details(cluster, standby=standby, private=private)
    except ServiceError:  # no admin user or default database row yet (creating)
        details = ConnectionDetails(
            cluster.admin_user,
            "",
            cluster.private_host if private else cluster.public_host,
            int((cluster.standby_port if standby else cluster.port) or 0),
            cluster.default_database,
        )
    return connection_object(details, with_password=with_password)


def connection_object(details: ConnectionDetails, *, with_password: bool) -> dict[str, Any]:
    """Connection details as the API's ``connection`` object; the password (in ``password`` and
    in the URI) only ``with_password``."""
    if not with_password:
        details = dataclasses.replace(details, password="")
    uri = details.uri()
    found: dict[str, Any] = {
        "protocol": "postgresql",
        "uri": uri,
        "database": details.database,
        "host": details.host,
        "port": details.port,
        "user": details.user,
        "password": details.password,
        "ssl": True,
    }
    if details.more_hosts:
        # A cluster with an entry on several nodes: ``uri`` is libpq's multi-host form, ``host``
        # and ``port`` its own node's entry (one host, for clients that take one).
        found["hosts"] = [{"host": host, "port": port} for host, port in details.hosts]
        found["target_session_attrs"] = details.target_session_attrs
    return found


def region(cluster: Cluster) -> str:
    """The node a cluster runs on stands for the managed service's region."""
    return cluster.node.name if cluster.node else settings.PANEL_NODE_NAME


def database(cluster: Cluster, *, with_password: bool) -> dict[str, Any]:
    """One cluster as the managed service's ``database`` object."""
    return {
        "id": cluster.pk,
        "name": cluster.name,
        "engine": ENGINE,
        "version": cluster.version,
        "status": cluster.status,
        "size": cluster.plan_slug,
        "region": region(cluster),
        "num_nodes": cluster.num_nodes,
        "created_at": cluster.created_at,
        "connection": connection(cluster, with_password=with_password),
    }


@dataclass(frozen=True)
class Page:
    """One page of a list: its rows, the total and the links to the other pages."""

    items: list[Any]
    total: int
    links: dict[str, Any]


def paginate(qs: QuerySet[Any], *, page: int, per_page: int, base_url: str) -> Page:
    """Rows ``(page-1)*per_page`` onwards, with the managed service's ``links.pages`` (first,
    prev, next, last: only those that exist)."""
    total = qs.count()
    last = max(1, math.ceil(total / per_page))
    # A page past the last is empty without asking the database: its offset may not fit the
    # database's integer (page=5782981586935445504 was a 500 on SQLite and PostgreSQL).
    items = list(qs[(page - 1) * per_page : page * per_page]) if page <= last else []

    def url(number: int) -> str:
        return f"{base_url}?{urlencode({'page': number, 'per_page': per_page})}"

    pages: dict[str, str] = {}
    if page > 1:
        pages["first"] = url(1)
        pages["prev"] = url(min(page - 1, last))
    if page < last:
        pages["next"] = url(page + 1)
        pages["last"] = url(last)
    return Page(items, total, {"pages": pages})


def check_create(*, engine: str, num_nodes: int, region: str | None) -> None:
    """What the managed service's create call asks that this panel cannot give, refused."""
    if engine != ENGINE:
        raise ServiceError(
            N_("Only the engine '%(offered)s' (PostgreSQL) is offered here, not '%(engine)s'."),
            field="engine",
            code="database.engine_unsupported",
            params={"offered": ENGINE, "engine": engine},
        )
    if region and not Node.objects.filter(name=region).exists():
        names = (
            ", ".join(Node.objects.order_by("name").values_list("name", flat=True))
            or settings.PANEL_NODE_NAME
        )
        raise ServiceError(
            N_("No region '%(region)s': the regions here are the nodes (%(names)s)."),
            field="region",
            code="database.region_unknown",
            params={"region": region, "names": names},
        )


def refuse_rule_type(index: int, kind: str) -> None:
    raise ServiceError(
        N_(
            "rules.%(index)d: the type '%(type)s' is not supported here: only IP addresses and CIDR "
            "ranges (type 'ip_addr') can be trusted sources of this panel's clusters."
        ),
        field="rules",
        code="firewall.rule_type_unsupported",
        params={"index": index, "type": kind},
    )


def options() -> dict[str, Any]:
    """What a new cluster can be: the installed versions, the nodes as regions, the plans as
    sizes of a one-node layout."""
    versions = sorted(cluster_services.available_versions(), key=lambda v: int(v) if v.isdigit() else 0)
    regions = list(
        Node.objects.filter(state=NodeState.ACTIVE).order_by("name").values_list("name", flat=True)
    )
    return {
        "options": {
            ENGINE: {
                "regions": regions or [settings.PANEL_NODE_NAME],
                "versions": versions,
                "layouts": [
                    {"num_nodes": 1, "sizes": [plan.slug for plan in PLANS]},
                    *(
                        {"num_nodes": n, "sizes": [p.slug for p in PLANS if p.ram_gb >= MIN_HA_RAM_GB]}
                        for n in range(2, MAX_NUM_NODES + 1)
                    ),
                ],
            }
        },
        "version_availability": {ENGINE: [{"version": version} for version in versions]},
    }
