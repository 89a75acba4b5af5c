"""Creating a local cluster (a row in ``creating``, its ports, the provisioning queued) and
retrying one whose provisioning failed. The provisioning itself is ``provision``."""

from __future__ import annotations

import secrets
import socket

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters.engine import postgres
from panel.clusters.lib.names import InvalidName, validate_cluster_name
from panel.clusters.lib.plans import PLANS_BY_SLUG, get_plan
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Node
from panel.clusters.services import nodes
from panel.core.errors import N_, Message, ServiceError
from panel.core.taskqueue import enqueue_task


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


# --- ports -------------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def allocate_ports(node: Node) -> tuple[int, int]:
    """The lowest free (server, pooler) pair of the node's range. On this process's own node its
    own PANEL_PORT_RANGE is the range, and the ports must be free to bind here too."""
    first, last = settings.PANEL_PORT_RANGE if node.is_here else (node.port_first, node.port_last)
    taken: set[int] = set()
    for port, pooler in Cluster.objects.filter(kind=ClusterKind.LOCAL, node=node).values_list(
        "port", "pooler_port"
    ):
        taken.update(p for p in (port, pooler) if p)
    for port in range(first, last, 2):
        pooler = port + 1
        if port in taken or pooler in taken:
            continue
        if not node.is_here or (_port_free(port) and _port_free(pooler)):
            return port, pooler
    raise ServiceError(
        N_(
            "No free ports are left in node “%(node)s”'s range %(first)s–%(last)s; delete a cluster or widen "
            "the range (PANEL_PORT_RANGE, or manage.py node add --ports on a new node)."
        ),
        code="cluster.no_free_ports",
        params={"node": node.name, "first": first, "last": last},
    )


# --- create, retry ------------------------------------------------------------------------


def create_cluster(
    owner: AbstractBaseUser,
    *,
    name: str,
    plan_slug: str,
    version: str | None = None,
    enqueue: bool = True,
    node: str | None = None,
) -> Cluster:
    """Record a new local cluster on a node (``node``, or the one with the most free capacity)
    and queue its provisioning there (or leave it for the caller)."""
    try:
        validate_cluster_name(name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    try:
        plan = get_plan(plan_slug)
    except ValueError:
        raise ServiceError(
            N_("Unknown plan %(plan)s; choose one of %(plans)s"),
            field="plan",
            code="cluster.plan_unknown",
            params={"plan": repr(plan_slug), "plans": ", ".join(PLANS_BY_SLUG)},
        ) from None
    if Cluster.objects.filter(owner=owner, name=name).exists():
        raise ServiceError(
            N_("You already have a cluster named “%(name)s”."),
            field="name",
            code="cluster.name_taken",
            params={"name": name},
        )
    for _attempt in range(5):
        try:
            with transaction.atomic():
                target = nodes.place(plan, node_name=node)
                version = _check_version(target, version)
                port, pooler_port = allocate_ports(target)
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
                )
            break
        except IntegrityError:
            if Cluster.objects.filter(owner=owner, name=name).exists():
                raise ServiceError(
                    N_("You already have a cluster named “%(name)s”."),
                    field="name",
                    code="cluster.name_taken",
                    params={"name": name},
                ) from None
            continue  # another request took the same ports: allocate again
    else:
        raise ServiceError(
            N_("Could not allocate ports for the cluster; try again."),
            code="cluster.ports_unavailable",
            params={},
        )
    cluster.log_event(
        "created",
        Message(
            N_("Cluster requested: plan %(plan)s, PostgreSQL %(v)s, node %(node)s, port %(port)s."),
            plan=plan_slug,
            v=version,
            node=target.name,
            port=port,
        ),
    )
    if enqueue:
        queue_provisioning(cluster)
    return cluster


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
            raise ServiceError(postgres.MISSING_BINARIES, field="version", code="node.binaries_missing")
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
    cluster.log_event("retry", Message(N_("Provisioning retried.")))
    return cluster
