"""Creating a local cluster (a row in ``creating``, its ports, the provisioning queued) and
retrying one whose provisioning failed. The provisioning itself is ``provision``."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters.engine import postgres
from panel.clusters.lib.names import InvalidName, name_taken, validate_cluster_name
from panel.clusters.lib.plans import Plan, require_plan
from panel.clusters.models import (
    MAX_NUM_NODES,
    MIN_HA_RAM_GB,
    Cluster,
    ClusterKind,
    ClusterMember,
    ClusterStatus,
    Node,
)
from panel.clusters.services import nodes, placement, transitions
from panel.clusters.services.ports import allocate_ports, allocate_standby_port
from panel.core.errors import N_, Message, ServiceError
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)


def new_password() -> str:
    return secrets.token_urlsafe(18)


def default_cluster_name() -> str:
    return f"db-postgresql-local-{secrets.randbelow(90000) + 10000}"


def available_versions() -> list[str]:
    """The PostgreSQL versions a new cluster can have: the ones installed here, or, in a web
    process (which runs none), the ones the nodes' agents reported."""
    if settings.PANEL_PROCESS_ROLE == "web":
        return nodes.node_versions()
    return list(postgres.installed_versions())


def _node_versions(node: Node) -> list[str]:
    return list(postgres.installed_versions()) if node.is_here else node.version_list()


# --- create, retry ------------------------------------------------------------------------


def create_cluster(
    owner: User,
    *,
    name: str,
    plan_slug: str,
    version: str | None = None,
    enqueue: bool = True,
    node: str | None = None,
    num_nodes: int = 1,
) -> Cluster:
    """Record a new local cluster on a node (``node``, or the one with the most free capacity)
    and queue its provisioning there (or leave it for the caller). With ``num_nodes`` 2 or 3 it
    has a primary and standbys (``ClusterMember`` rows), each counted against the node."""
    try:
        validate_cluster_name(name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    plan = require_plan(plan_slug)
    check_num_nodes(plan, num_nodes)
    if Cluster.objects.filter(owner=owner, name=name).exists():
        raise name_taken(name)
    for _attempt in range(5):
        try:
            with transaction.atomic():
                # The primary's node needs room for one server; the standbys go where
                # ``placement.member_nodes`` finds room (other nodes first).
                target = placement.place(plan, node_name=node)
                version = _check_version(target, version)
                port, pooler_port, _none = allocate_ports(target)
                cluster = Cluster.objects.create(
                    owner=owner,
                    name=name,
                    kind=ClusterKind.LOCAL,
                    version=version,
                    plan_slug=plan_slug,
                    status=ClusterStatus.CREATING,
                    progress=0,
                    progress_message=_("Queued"),
                    node=target,
                    host="127.0.0.1",
                    port=port,
                    pooler_port=pooler_port,
                    num_nodes=num_nodes,
                    standby_port=(
                        allocate_standby_port(target, {port, pooler_port}) if num_nodes > 1 else None
                    ),
                )
                if num_nodes > 1:
                    standby_nodes = placement.member_nodes(cluster, num_nodes - 1)
                    for index, member_node in enumerate([target, *standby_nodes], start=1):
                        add_member(cluster, f"member-{index}", member_node)
            break
        except IntegrityError:
            if Cluster.objects.filter(owner=owner, name=name).exists():
                raise name_taken(name) from None
            continue  # another request took the same ports: allocate again
    else:
        raise ServiceError(
            N_("Could not allocate ports for the cluster; try again."),
            code="cluster.ports_unavailable",
            params={},
        )
    transitions.log_event(
        cluster,
        "created",
        Message(
            N_("Cluster requested: plan %(plan)s, PostgreSQL %(v)s, node %(node)s, port %(port)s."),
            plan=plan_slug,
            v=version,
            node=target.name,
            port=port,
        ),
    )
    if num_nodes > 1:
        member_nodes = sorted({m.node.name for m in cluster.members.select_related("node")})
        if len(member_nodes) == 1:
            text = N_("%(n)s members (a primary and %(standbys)s standbys), all on node %(node)s.")
        else:
            text = N_("%(n)s members (a primary and %(standbys)s standbys) on the nodes %(node)s.")
        transitions.log_event(
            cluster,
            "members",
            Message(text, n=num_nodes, standbys=num_nodes - 1, node=", ".join(member_nodes)),
        )
    if enqueue:
        queue_provisioning(cluster)
    return cluster


def member_data_dir(cluster: Cluster, name: str, node: Node) -> str:
    """A member's data directory under its node's data directory: member 1's is the cluster's
    PGDATA (what provisioning makes); another's is made by Patroni (a copy of the primary)."""
    root = cluster.data_root if node.is_here else Path(node.data_dir) / "clusters" / cluster.pk.hex
    return str(root / "pgdata" if name == "member-1" else root / "members" / name)


def add_member(cluster: Cluster, name: str, node: Node) -> ClusterMember:
    """A member's row on ``node`` with a (port, REST port) pair of that node's range (inside the
    caller's transaction: a pair another request took meanwhile is an IntegrityError)."""
    member_port, rest_port, _none = allocate_ports(node)
    return ClusterMember.objects.create(
        cluster=cluster,
        name=name,
        node=node,
        port=member_port,
        rest_port=rest_port,
        data_dir=member_data_dir(cluster, name, node),
    )


def check_num_nodes(plan: Plan, num_nodes: int) -> None:
    """1 to 3 members; standbys only on plans of 2 GB or more (the managed service's rules)."""
    if not 1 <= num_nodes <= MAX_NUM_NODES:
        raise ServiceError(
            N_("A cluster has 1 to %(max)s nodes (a primary and up to two standbys), not %(n)s."),
            field="num_nodes",
            code="cluster.num_nodes_range",
            params={"max": MAX_NUM_NODES, "n": num_nodes},
        )
    if num_nodes > 1 and plan.ram_gb < MIN_HA_RAM_GB:
        raise ServiceError(
            N_("Standby nodes need a plan with %(gb)s GB of RAM or more; %(plan)s has %(has)s GB."),
            field="num_nodes",
            code="cluster.standbys_need_larger_plan",
            params={"gb": MIN_HA_RAM_GB, "plan": plan.slug, "has": plan.ram_gb},
        )


def queue_provisioning(cluster: Cluster) -> None:
    """Send a new cluster's provisioning to its node; a broker that does not answer removes the
    row again (nothing was started) and is the ServiceError the form shows."""
    try:
        enqueue_task("panel.clusters.tasks.provision", str(cluster.pk), queue=cluster.tasks_queue)
    except ServiceError:
        cluster.delete()
        raise


def _check_version(node: Node, version: str | None) -> str:
    versions = _node_versions(node)
    if not versions:
        if node.is_here:
            log.warning("node %s: %s", node.name, postgres.MISSING_BINARIES)  # the operator's part
            raise ServiceError(
                N_(
                    "No PostgreSQL server is installed on node “%(node)s”: ask the panel's operator to install one."
                ),
                field="version",
                code="node.binaries_missing",
                params={"node": node.name},
            )
        raise ServiceError(
            N_("Node “%(node)s” has reported no PostgreSQL installation yet."),
            field="version",
            code="node.no_postgresql",
            params={"node": node.name},
        )
    version = version or versions[0]
    if version not in versions:
        raise ServiceError(
            N_("PostgreSQL %(v)s is not installed on node “%(node)s”; choose one of %(all)s."),
            field="version",
            code="node.version_missing",
            params={"v": version, "node": node.name, "all": ", ".join(versions)},
        )
    return version


def retry_cluster(cluster: Cluster, *, enqueue: bool = True) -> Cluster:
    """Provision again a cluster whose creation failed."""
    if (
        cluster.status != ClusterStatus.ERROR
        or not cluster.is_local
        or cluster.online_since is not None
        or cluster.is_replica  # made by its own pipeline: delete it and add it again
    ):
        raise ServiceError(
            N_("Only a cluster whose creation failed can be retried."),
            code="cluster.retry_not_failed",
            params={},
        )
    previous = {"error_message": cluster.error_message, "progress": cluster.progress}
    # QuerySet.update() skips auto_now: without updated_at the reconciler would take the job,
    # queued a moment ago, for one stuck since the row last changed.
    updated = Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ERROR).update(
        status=ClusterStatus.CREATING,
        progress=0,
        progress_message=_("Queued"),
        error_message="",
        updated_at=timezone.now(),
    )
    if not updated:
        raise ServiceError(
            N_("The cluster changed meanwhile; reload the page."), code="cluster.changed_meanwhile", params={}
        )
    if enqueue:
        try:
            enqueue_task("panel.clusters.tasks.provision", str(cluster.pk), queue=cluster.tasks_queue)
        except ServiceError:
            # Nothing was retried: keep showing why the creation failed.
            Cluster.objects.filter(pk=cluster.pk).update(
                status=ClusterStatus.ERROR, progress_message="", updated_at=timezone.now(), **previous
            )
            cluster.refresh_from_db()
            raise
    cluster.refresh_from_db()
    transitions.log_event(cluster, "retry", Message(N_("Provisioning retried.")))
    return cluster
