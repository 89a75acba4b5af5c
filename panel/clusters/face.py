"""What the other apps may use of clusters, besides its models, its pure lib and its hooks: the
one door, kept by pyproject.toml's contract "other apps reach clusters through its face". A name
is here because an app outside clusters uses it; add one here rather than import past the face."""

from panel.clusters import services
from panel.clusters.connection import SECRET_FORMATS, connection_box
from panel.clusters.engine import cgroups, dbconn, isolation, panel_roles, postgres
from panel.clusters.management.cli import (
    PanelCommand,
    cluster_subcommands,
    find_cluster,
    find_user,
    human_size,
    print_table,
)
from panel.clusters.ownership import clusters_for, get_cluster_for_user
from panel.clusters.replicas.services import replicas, streaming
from panel.clusters.services import (
    attach,
    config,
    create_cluster,
    cycles,
    destinations,
    failures,
    firewall,
    lifecycle,
    nodes,
    perform_action,
    provision,
    resize,
    roles,
    transitions,
)
from panel.clusters.services.create import new_password
from panel.clusters.services.lifecycle import require_local
from panel.clusters.services.overview import database_user
from panel.clusters.standbys.engine import member_tls
from panel.clusters.standbys.lib.vip import host_of
from panel.clusters.standbys.services import ha, members, switchover
from panel.clusters.templatetags.numbers import number

__all__ = [
    "PanelCommand",
    "SECRET_FORMATS",
    "attach",
    "cgroups",
    "cluster_subcommands",
    "clusters_for",
    "config",
    "connection_box",
    "create_cluster",
    "cycles",
    "database_user",
    "dbconn",
    "destinations",
    "failures",
    "find_cluster",
    "find_user",
    "firewall",
    "get_cluster_for_user",
    "ha",
    "host_of",
    "human_size",
    "isolation",
    "lifecycle",
    "member_tls",
    "members",
    "new_password",
    "nodes",
    "number",
    "panel_roles",
    "perform_action",
    "postgres",
    "print_table",
    "provision",
    "replicas",
    "require_local",
    "resize",
    "roles",
    "services",
    "streaming",
    "switchover",
    "transitions",
]
