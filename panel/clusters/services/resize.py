"""Resize: move a cluster to another plan (RAM, vCPUs, disk, and the connections they imply).

``resize_cluster`` is the one action the web, the API and the command line call: it refuses what
cannot work (an unknown or the same plan, a node without room, pools over a smaller plan's
budget, data over its disk, a cluster that is not online), then marks the cluster ``resizing``
and queues the work on its node (or, from the command line, does it here and now).

``perform_resize`` is that work, on the node: record the new plan (its room checked again under
the node's lock) → write panel.conf (``max_connections``, ``shared_buffers``) → restart PostgreSQL,
whose start sets the cgroup's limits to the plan's → PgBouncer in line with the new budget →
online. A failure puts the old plan back the same way, and the reason on the page.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from panel.clusters import hooks
from panel.clusters.engine import isolation, postgres
from panel.clusters.lib.plans import PLANS, Plan, get_plan, require_plan
from panel.clusters.models import Cluster, ClusterStatus, EventLevel, Node, status_word
from panel.clusters.services import failures, nodes, transitions
from panel.clusters.services.lifecycle import guard_loaded, require_local, start_server
from panel.clusters.services.overview import overview
from panel.clusters.services.provision import write_server_config
from panel.clusters.standbys.services import member_count, remote_members, rolling
from panel.core import runas
from panel.core.errors import N_, Message, ServiceError, message_to_text

log = logging.getLogger(__name__)

GB = 1024**3
FIELD = "size"


@dataclass(frozen=True)
class Circumstances:
    """What decides whether a plan fits the cluster, read once for all plans."""

    current: str
    data_size_bytes: int | None
    pool_sizes: dict[str, int]
    free_ram_bytes: int | None  # None: no node to check (a cluster from before nodes)
    free_vcpus: int | None
    node_name: str
    # A replica's plan stays at least its source's; a source's at most its smallest replica's.
    source_plan: Plan | None = None
    replica_plans: tuple[Plan, ...] = ()


@dataclass(frozen=True)
class PlanChoice:
    """One plan as the Resize card shows it: the current one, or why it does not fit."""

    plan: Plan
    current: bool
    problem: Message | None


def circumstances(cluster: Cluster) -> Circumstances:
    free_ram = free_vcpus = None
    if cluster.node:
        room = nodes.usage(cluster.node)
        own = cluster.plan
        # The cluster's own plan is given back by the resize: it counts as free.
        free_ram = room.free_ram_bytes + (own.ram_bytes if own else 0)
        free_vcpus = room.free_vcpus + (own.vcpus if own else 0)
    size = overview(cluster).data_size_bytes if cluster.is_serving else None
    return Circumstances(
        current=cluster.plan_slug,
        data_size_bytes=size,
        pool_sizes=hooks.pooler.pool_sizes(cluster),
        free_ram_bytes=free_ram,
        free_vcpus=free_vcpus,
        node_name=cluster.node.name if cluster.node else "",
        source_plan=cluster.replica_of.plan if cluster.replica_of else None,
        replica_plans=tuple(
            p for p in (get_plan(s) for s in cluster.replicas.values_list("plan_slug", flat=True))
        ),
    )


def plan_problem(plan: Plan, now: Circumstances) -> Message | None:
    """Why the cluster cannot move to ``plan`` (in the reader's language when shown), or None."""
    if plan.slug == now.current:
        return Message(N_("The cluster is already on plan %(plan)s."), "resize.same_plan", plan=plan.slug)
    if (
        now.free_ram_bytes is not None
        and now.free_vcpus is not None
        and (now.free_ram_bytes < plan.ram_bytes or now.free_vcpus < plan.vcpus)
    ):
        return Message(
            N_(
                "Node “%(node)s” has no room for plan %(plan)s: it can give this cluster %(ram).1f GB of "
                "RAM and %(cpu)d vCPUs, the plan needs %(need_ram)d GB and %(need_cpu)d vCPUs."
            ),
            "resize.node_full",
            node=now.node_name,
            plan=plan.slug,
            ram=max(0, now.free_ram_bytes) / GB,
            cpu=max(0, now.free_vcpus),
            need_ram=plan.ram_gb,
            need_cpu=plan.vcpus,
        )
    if now.source_plan is not None and plan.smaller_than(now.source_plan):
        return Message(
            N_("A replica's plan must be at least its source's (%(plan)s); %(chosen)s is smaller."),
            "replica.plan_too_small",
            plan=now.source_plan.slug,
            chosen=plan.slug,
        )
    too_small = [p.slug for p in now.replica_plans if p.smaller_than(plan)]
    if too_small:
        return Message(
            N_(
                "The cluster's read-only replicas must be at least as large as it: resize them to %(plan)s "
                "or larger first (%(plans)s)."
            ),
            "resize.replicas_too_small",
            plan=plan.slug,
            plans=", ".join(too_small),
        )
    used = sum(now.pool_sizes.values())
    if used > plan.pool_connections:
        pools = ", ".join(f"“{name}” ({size})" for name, size in now.pool_sizes.items())
        return Message(
            N_(
                "The pools use %(used)d connections (%(pools)s) and plan %(plan)s leaves %(budget)d for "
                "pools: make them smaller by %(shrink)d in all, or delete some, first."
            ),
            "resize.pools_too_big",
            used=used,
            pools=pools,
            plan=plan.slug,
            budget=plan.pool_connections,
            shrink=used - plan.pool_connections,
        )
    if now.data_size_bytes is not None and now.data_size_bytes > plan.disk_bytes:
        return Message(
            N_(
                "The data takes %(size).1f GB and plan %(plan)s has a %(disk)d GB disk: free some space first."
            ),
            "resize.data_too_big",
            size=now.data_size_bytes / GB,
            plan=plan.slug,
            disk=plan.disk_gb,
        )
    return None


def plan_choices(cluster: Cluster) -> list[PlanChoice]:
    """Every plan for the Resize card, the current one marked, those that do not fit with why."""
    now = circumstances(cluster)
    return [
        PlanChoice(
            plan, plan.slug == now.current, None if plan.slug == now.current else plan_problem(plan, now)
        )
        for plan in PLANS
    ]


def _require_online(cluster: Cluster) -> None:
    cluster.refresh_from_db(fields=["status"])
    if cluster.status != ClusterStatus.ONLINE:
        raise ServiceError(
            N_("The cluster is %(status)s; it can be resized only while online."),
            field=FIELD,
            code="resize.not_online",
            params={"status": status_word(cluster.status)},
        )


def check_resize(cluster: Cluster, plan_slug: str) -> Plan:
    """The plan to move to, or the ServiceError that says why not."""
    require_local(cluster)
    plan = require_plan(plan_slug, FIELD)
    _require_online(cluster)
    silent = remote_members.silent_member(cluster)
    if silent is not None:  # the new plan's panel.conf would not reach it: refused, nothing changed
        raise ServiceError(
            N_("The member %(member)s on node %(node)s is not answering: resize once its agent is back."),
            field=FIELD,
            code="resize.member_silent",
            params={"member": silent.name, "node": silent.node.name},
        )
    problem = plan_problem(plan, circumstances(cluster))
    if problem:
        raise ServiceError.joined([problem], FIELD)
    return plan


def resize_cluster(
    cluster: Cluster, plan_slug: str, *, enqueue: bool = True, num_nodes: int | None = None
) -> Cluster:
    """Move the cluster to ``plan_slug``: checked, marked ``resizing``, and the work queued on its
    node (``enqueue=False``: done here and now, for the command line). A ``num_nodes`` other than
    the cluster's changes its members instead (``member_count``), one change at a time."""
    if num_nodes is not None and num_nodes != cluster.num_nodes:
        if plan_slug and plan_slug != cluster.plan_slug:
            raise ServiceError(
                N_("Change the plan or the number of nodes, one at a time: the plan first, then the nodes."),
                field="num_nodes",
                code="resize.one_change_at_a_time",
                params={},
            )
        return member_count.change_member_count(cluster, num_nodes, enqueue=enqueue)
    plan = check_resize(cluster, plan_slug)
    if not member_count.mark_resizing(cluster, _("Resizing to %(plan)s") % {"plan": plan.slug}):
        _require_online(cluster)  # it is no longer online: says so
        raise member_count.changed_meanwhile(FIELD)
    transitions.log_event(
        cluster,
        "resize-requested",
        Message(
            N_("Resize from %(old)s to %(new)s requested; PostgreSQL restarts."),
            old=cluster.plan_slug,
            new=plan.slug,
        ),
    )
    return member_count.queue_resizing(
        cluster, "panel.clusters.tasks.resize", plan.slug, perform_resize, enqueue=enqueue
    )


# --- on the node -------------------------------------------------------------------------------


def _record_plan(cluster: Cluster, plan: Plan) -> None:
    """The new plan on the row, its room checked again under the node's lock (a cluster created
    on the node since the request may have taken it)."""
    with transaction.atomic():
        if cluster.node_id:
            Node.objects.select_for_update().get(pk=cluster.node_id)
        problem = plan_problem(plan, circumstances(cluster))
        if problem:
            raise ServiceError.joined([problem], FIELD)
        cluster.plan_slug = plan.slug
        cluster.save(update_fields=["plan_slug", "updated_at"])


def _restart_on_plan(cluster: Cluster, *, rolling_back: bool = False) -> None:
    """panel.conf for the row's plan (on members on other nodes too, through their agents),
    PostgreSQL restarted (its start sets the cgroup's limits), PgBouncer's configuration rendered
    again for the new pool budget."""
    user = isolation.os_user(cluster)
    transitions.set_progress(cluster, 20, _("Writing the configuration"))
    guard_added = write_server_config(cluster)
    if cluster.is_ha:
        _push_to_remote_members(cluster, rolling_back=rolling_back)
    transitions.set_progress(cluster, 40, _("Restarting PostgreSQL"))
    if cluster.is_ha:
        # Member by member, standbys first, the primary after a switchover (standbys/services/rolling.py).
        rolling.rolling_restart(cluster)
        guard_loaded(cluster, guard_added=guard_added)
    else:
        postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=settings.PANEL_COMMAND_TIMEOUT)
        start_server(cluster, user, guard_added=guard_added)
    transitions.set_progress(cluster, 80, _("Updating PgBouncer"))
    hooks.pooler.reapply_config(cluster)  # never raises: a failure is on the pooler and in the events


def _push_to_remote_members(cluster: Cluster, *, rolling_back: bool) -> None:
    """The plan's panel.conf (and the member's cgroup limits) on each member on another node,
    before the rolling restart reads it there. A member that does not take it fails the resize
    (the others got their previous files back: ``push_config``), which puts the old plan back;
    when even that push fails, the member kept its previous files: said in the log."""
    try:
        remote_members.push_config(cluster)
    except runas.EngineError as exc:
        if not rolling_back:
            raise
        log.warning("resize of %s rolled back: %s", cluster.pk, exc)


def perform_resize(cluster_id: uuid.UUID | str, plan_slug: str) -> Cluster | None:
    """The node's half of ``resize_cluster``, on a cluster marked ``resizing``. On failure the
    old plan is put back (and PostgreSQL restarted on it if needed): the cluster is online again
    with the reason shown, or in ``error`` if even that failed."""
    cluster = Cluster.objects.filter(pk=cluster_id, status=ClusterStatus.RESIZING).first()
    if cluster is None:
        return None
    old = cluster.plan_slug
    plan = get_plan(plan_slug)
    try:
        _record_plan(cluster, plan)
    except ServiceError as exc:  # refused on the node: nothing was changed
        _back_online(cluster, Message(N_("The cluster was not resized: %(reason)s"), reason=exc.as_message()))
        return cluster
    try:
        _restart_on_plan(cluster)
    except Exception as exc:
        if not isinstance(exc, runas.EngineError | OSError | ServiceError):
            log.exception("resizing %s crashed", cluster.pk)
        return _roll_back(cluster, old, plan, exc)
    transitions.mark_online(cluster)
    transitions.log_event(
        cluster,
        "resized",
        Message(
            N_(
                "Resized from %(old)s to %(new)s: %(ram)d GB RAM, %(cpu)d vCPUs, %(disk)d GB disk, %(conn)d connections."
            ),
            old=old,
            new=plan.slug,
            ram=plan.ram_gb,
            cpu=plan.vcpus,
            disk=plan.disk_gb,
            conn=plan.max_connections,
        ),
    )
    return cluster


def _back_online(cluster: Cluster, reason: Message) -> None:
    transitions.mark_online(cluster)
    cluster.error_message = message_to_text(reason)
    cluster.save(update_fields=["error_message", "updated_at"])
    transitions.log_event(cluster, "resize-failed", reason, EventLevel.ERROR)


def _roll_back(cluster: Cluster, old: str, plan: Plan, exc: Exception) -> Cluster:
    log.warning("resizing %s to %s failed: %s", cluster.pk, plan.slug, str(exc) or type(exc).__name__)
    reason = failures.reason(exc)  # the engine's words: the log only
    cluster.plan_slug = old
    cluster.save(update_fields=["plan_slug", "updated_at"])
    try:
        _restart_on_plan(cluster, rolling_back=True)
    except Exception as again:
        log.warning("restarting %s on %s failed too: %s", cluster.pk, old, str(again) or type(again).__name__)
        message = Message(
            N_("Resizing to %(plan)s failed (%(reason)s), and restarting on %(old)s failed too: %(again)s"),
            plan=plan.slug,
            reason=reason,
            old=old,
            again=failures.reason(again),
        )
        transitions.mark_error(cluster, message_to_text(message))
        transitions.log_event(cluster, "error", message, EventLevel.ERROR)
        return cluster
    _back_online(
        cluster,
        Message(
            N_("Resizing to %(plan)s failed, so the cluster is back on %(old)s: %(reason)s"),
            plan=plan.slug,
            old=old,
            reason=reason,
        ),
    )
    return cluster
