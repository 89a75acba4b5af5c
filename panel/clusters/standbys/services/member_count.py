"""Changing a cluster's member count (``num_nodes`` 1–3): standby nodes added or removed.

``change_member_count`` is the one action the Settings tab's resize form, the API's
``PUT /v2/databases/{id}/resize`` (``num_nodes``) and ``manage.py cluster resize --num-nodes``
call: it refuses what cannot work (a count outside 1–3 or the same, standbys on a plan under
2 GB, a read-only replica, no node with room for a new member, a cluster not online) with
nothing changed, then marks the cluster ``resizing`` and queues the work on its node.

``perform_member_count`` is that work (``membership`` does each step):

- up from one: Patroni takes the server over as at creation, the standbys are made, HAProxy
  takes the cluster's port (clients are cut once, while the postmaster moves to Patroni);
- up from two: a standby more, HAProxy reloaded (nobody cut);
- down: standbys other than member 1 go first; down to one, member 1 is made the primary (a
  switchover, the pools paused) and the last standby goes, then member 1 leaves Patroni and runs
  as the one postmaster on the cluster's port again (clients cut once).

Strict synchronous mode follows the count (strict only with three). Each member added or removed
is an event; a failure is on the page with its reason.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters import hooks
from panel.clusters.engine import isolation, postgres
from panel.clusters.models import Cluster, ClusterStatus, EventLevel, MemberRole, Node, status_word
from panel.clusters.services import failures, placement, transitions
from panel.clusters.services.create import check_num_nodes
from panel.clusters.services.lifecycle import guard_loaded, require_local
from panel.clusters.standbys.services import ha, membership, switchover
from panel.core import runas
from panel.core.errors import N_, Message, ServiceError, message_to_text
from panel.core.taskqueue import enqueue_task

log = logging.getLogger(__name__)

FIELD = "num_nodes"
T = TypeVar("T", str, int)  # what a task carries


def check_member_count(cluster: Cluster, num_nodes: int) -> None:
    """The ServiceError that says why the cluster cannot have ``num_nodes`` members now."""
    require_local(cluster)
    plan = cluster.plan
    assert plan is not None
    check_num_nodes(plan, num_nodes)
    if num_nodes == cluster.num_nodes:
        raise ServiceError(
            N_("The cluster has %(n)s node(s) already."),
            field=FIELD,
            code="resize.same_num_nodes",
            params={"n": num_nodes},
        )
    if cluster.is_replica and num_nodes > 1:
        raise ServiceError(
            N_("A read-only replica has no standby nodes; promote it to a cluster first."),
            field=FIELD,
            code="resize.replica_standbys",
            params={},
        )
    cluster.refresh_from_db(fields=["status"])
    if cluster.status != ClusterStatus.ONLINE:
        raise ServiceError(
            N_("The cluster is %(status)s; its nodes can be changed only while online."),
            field=FIELD,
            code="resize.not_online",
            params={"status": status_word(cluster.status)},
        )
    _check_room(cluster, num_nodes)


def _check_room(cluster: Cluster, num_nodes: int) -> None:
    """Placement finds a node for each new standby (other nodes first, the cluster's own when none
    has room), else refuses with each node's reason (``node.full``). Member 1 is the server that
    runs now: it takes no more room."""
    if cluster.node is None or cluster.plan is None or num_nodes <= cluster.num_nodes:
        return
    standbys = num_nodes - max(cluster.members.count(), 1)
    with transaction.atomic():  # (placement locks the nodes' rows it reads)
        placement.member_nodes(cluster, standbys)


def change_member_count(cluster: Cluster, num_nodes: int, *, enqueue: bool = True) -> Cluster:
    """Give the cluster ``num_nodes`` members: checked, marked ``resizing``, the work queued on
    its node (``enqueue=False``: done here and now, for the command line and the tests)."""
    check_member_count(cluster, num_nodes)
    if not mark_resizing(cluster, _("Changing to %(n)s node(s)") % {"n": num_nodes}):
        raise changed_meanwhile(FIELD)
    transitions.log_event(
        cluster,
        "members-requested",
        Message(
            N_("Change from %(old)s to %(new)s node(s) requested."), old=cluster.num_nodes, new=num_nodes
        ),
    )
    return queue_resizing(
        cluster, "panel.clusters.tasks.member_count", num_nodes, perform_member_count, enqueue=enqueue
    )


def mark_resizing(cluster: Cluster, progress_message: str) -> bool:
    """The cluster's row from ``online`` to ``resizing`` (a plan or a member count changing); False
    when it was not online any more, and nothing changed."""
    return bool(
        Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ONLINE).update(
            status=ClusterStatus.RESIZING,
            progress=0,
            progress_message=progress_message,
            error_message="",
            updated_at=timezone.now(),
        )
    )


def changed_meanwhile(field: str) -> ServiceError:
    """The refusal when the row was no longer online by the time it was to be marked."""
    return ServiceError(
        N_("The cluster changed meanwhile; try again."),
        field=field,
        code="cluster.changed_meanwhile",
        params={},
    )


def queue_resizing(
    cluster: Cluster,
    task: str,
    argument: T,
    perform: Callable[[uuid.UUID, T], object],
    *,
    enqueue: bool,
) -> Cluster:
    """The node's half of a cluster marked ``resizing``: ``task`` queued on its node (the row back
    to ``online`` when it cannot be), or ``perform`` here and now; the cluster read again."""
    if enqueue:
        try:
            enqueue_task(task, str(cluster.pk), argument, queue=cluster.tasks_queue)
        except ServiceError:
            Cluster.objects.filter(pk=cluster.pk).update(
                status=ClusterStatus.ONLINE, progress=100, progress_message="", updated_at=timezone.now()
            )
            raise
    else:
        perform(cluster.pk, argument)
    cluster.refresh_from_db()
    return cluster


# --- on the node -------------------------------------------------------------------------------


def perform_member_count(cluster_id: uuid.UUID | str, num_nodes: int) -> Cluster | None:
    """The node's half of ``change_member_count`` on a cluster marked ``resizing``."""
    cluster = Cluster.objects.filter(pk=cluster_id, status=ClusterStatus.RESIZING).first()
    if cluster is None:
        return None
    old = cluster.num_nodes
    started = time.monotonic()
    try:
        if num_nodes > old:
            _grow(cluster, num_nodes)
        else:
            _shrink(cluster, num_nodes)
        hooks.pooler.reapply_config(cluster)  # PgBouncer to the primary's port (never raises)
    except Exception as exc:
        if not isinstance(exc, runas.EngineError | OSError | ServiceError):
            log.exception("changing the members of %s crashed", cluster.pk)
        return _failed(cluster, old, num_nodes, exc)
    transitions.mark_online(cluster)
    transitions.log_event(
        cluster,
        "members-changed",
        Message(
            N_("The cluster has %(n)s node(s) now (was %(old)s); the change took %(s).1f s."),
            n=num_nodes,
            old=old,
            s=time.monotonic() - started,
        ),
    )
    return cluster


def _grow(cluster: Cluster, num_nodes: int) -> None:
    user = isolation.os_user(cluster)
    was_single = not cluster.is_ha
    with transaction.atomic():
        if cluster.node_id:
            Node.objects.select_for_update().get(pk=cluster.node_id)
        _check_room(cluster, num_nodes)  # again, under the node's lock
        new = membership.add_rows(cluster, num_nodes - cluster.members.count())
        cluster.num_nodes = num_nodes
        cluster.save(update_fields=["num_nodes", "updated_at"])
    transitions.set_progress(cluster, 20, _("Starting the standbys"))
    if was_single:
        guard_loaded(cluster, guard_added=membership.take_over(cluster, user))
    else:
        membership.start_new(cluster, new, user)
    transitions.set_progress(cluster, 60, _("Waiting for the standbys"))
    if not ha.wait_healthy(cluster, membership.timeout()):
        raise runas.EngineError(_("The standbys did not catch up with the primary in time."))
    for member in new:
        if member.name != membership.FIRST:
            transitions.log_event(
                cluster,
                "member-added",
                Message(
                    N_("Standby %(member)s added on port %(port)s."), member=member.name, port=member.port
                ),
            )


def _shrink(cluster: Cluster, num_nodes: int) -> None:
    user = isolation.os_user(cluster)
    ha.refresh_members(cluster)
    if cluster.members.count() > 2:
        # Not strict before a standby goes: a primary with one standby left must keep writing.
        membership.patch_dynamic(cluster, strict=False)
    while cluster.members.count() > max(num_nodes, 2):
        _remove_one(cluster, _standby_to_remove(cluster))
    if num_nodes >= 2:
        cluster.num_nodes = num_nodes
        cluster.save(update_fields=["num_nodes", "updated_at"])
        ha.write_configs(cluster, user)
        membership.patch_dynamic(cluster)  # no longer strict with two
        ha.reload_haproxy(cluster, user, membership.timeout())
        return
    if not cluster.members.filter(name=membership.FIRST, role=MemberRole.PRIMARY).exists():
        transitions.set_progress(cluster, 40, _("Switching over to member-1"))
        if not ha.wait_healthy(cluster, membership.timeout()):
            raise runas.EngineError(_("member-1 is not streaming; the cluster keeps its nodes."))
        switchover.switch(cluster, membership.FIRST)
    _remove_one(cluster, _standby_to_remove(cluster))
    transitions.set_progress(cluster, 70, _("Starting PostgreSQL without Patroni"))
    cluster.num_nodes = 1
    cluster.save(update_fields=["num_nodes", "updated_at"])
    guard_loaded(cluster, guard_added=membership.hand_back(cluster, user))


def _standby_to_remove(cluster: Cluster) -> str:
    """The last standby by name that is not member 1 (which holds the cluster's PGDATA)."""
    ha.refresh_members(cluster)
    candidates = cluster.members.exclude(role=MemberRole.PRIMARY).exclude(name=membership.FIRST)
    member = candidates.order_by("-name").first()
    if member is None:
        raise runas.EngineError(_("No standby other than member-1 to remove."))
    return member.name


def _remove_one(cluster: Cluster, name: str) -> None:
    transitions.set_progress(cluster, 30, _("Removing %(member)s") % {"member": name})
    membership.remove(cluster, cluster.members.get(name=name))
    transitions.log_event(cluster, "member-removed", Message(N_("Standby %(member)s removed."), member=name))


def _failed(cluster: Cluster, old: int, wanted: int, exc: Exception) -> Cluster:
    """The reason on the page and in the events. The row keeps the members that exist: online
    when they serve (fewer or more than asked), in error otherwise (Start or the reconciler)."""
    log.warning(
        "changing %s from %s to %s members failed: %s",
        cluster.pk,
        old,
        wanted,
        str(exc) or type(exc).__name__,
    )
    reason = failures.reason(exc)  # the engine's words: the log only
    count = max(1, cluster.members.count())
    cluster.num_nodes = count
    cluster.save(update_fields=["num_nodes", "updated_at"])
    event = Message(N_("Changing to %(n)s node(s) failed: %(reason)s"), n=wanted, reason=reason)
    message = message_to_text(event)
    if cluster.is_ha:
        serving = ha.wait_healthy(cluster, 10)
    else:  # refused before anything changed, or handed back already
        serving = postgres.postmaster_pid(cluster.pgdata) is not None
    if serving:
        transitions.mark_online(cluster)
        cluster.error_message = message
        cluster.save(update_fields=["error_message", "updated_at"])
    else:
        transitions.mark_error(cluster, message)
    transitions.log_event(cluster, "members-failed", event, EventLevel.ERROR)
    return cluster
