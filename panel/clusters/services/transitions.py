"""A cluster's status and the events it records: the one-row transitions of its status (progress,
online, error, another status, a postmaster gone), the one "start it first" refusal, and
``log_event``. Every writer of a cluster's status goes through these, whatever app it is in."""

from __future__ import annotations

from typing import cast

from django.utils import timezone, translation
from django.utils.functional import Promise

from panel.clusters.models import Cluster, ClusterEvent, ClusterStatus, EventLevel, status_word
from panel.core.errors import N_, Message, ServiceError, message_to_json


def set_progress(cluster: Cluster, percent: int, message: str) -> None:
    cluster.progress = percent
    cluster.progress_message = message
    cluster.save(update_fields=["progress", "progress_message", "updated_at"])


def mark_online(cluster: Cluster) -> None:
    cluster.status = ClusterStatus.ONLINE
    cluster.progress = 100
    cluster.progress_message = ""
    cluster.error_message = ""
    cluster.online_since = timezone.now()
    cluster.save(
        update_fields=[
            "status",
            "progress",
            "progress_message",
            "error_message",
            "online_since",
            "updated_at",
        ]
    )


def mark_error(cluster: Cluster, reason: str) -> None:
    cluster.status = ClusterStatus.ERROR
    cluster.error_message = reason
    cluster.progress_message = ""
    cluster.save(update_fields=["status", "error_message", "progress_message", "updated_at"])


def mark(cluster: Cluster, status: str) -> None:
    cluster.status = status
    if status != ClusterStatus.ONLINE and status != ClusterStatus.DEGRADED:
        cluster.online_since = None
    cluster.save(update_fields=["status", "online_since", "updated_at"])


def mark_postmaster_gone(cluster: Cluster) -> bool:
    """An online cluster whose postmaster is gone is degraded until the reconciler restarts it;
    the update is conditional, so a user's stop or a restart in flight is never overwritten.
    True when this call changed it (and logged the event)."""
    if not Cluster.objects.filter(pk=cluster.pk, status=ClusterStatus.ONLINE).update(
        status=ClusterStatus.DEGRADED, updated_at=timezone.now()
    ):
        return False
    cluster.refresh_from_db(fields=["status", "updated_at"])
    log_event(
        cluster,
        "postmaster-gone",
        Message(N_("PostgreSQL is not running; the reconciler will start it again.")),
        EventLevel.WARNING,
    )
    return True


def require_serving(cluster: Cluster, *, fresh: bool = False, field: str | None = None) -> None:
    """The one "start it first" refusal of every action that needs a running server.

    ``fresh`` reads the status again first (a worker may have stopped it since the request).
    """
    if fresh:
        cluster.refresh_from_db(fields=["status"])
    if not cluster.is_serving:
        raise ServiceError(
            N_("The cluster is %(status)s; start it first."),
            field=field,
            code="cluster.not_serving",
            params={"status": status_word(cluster.status)},
        )


def log_event(
    cluster: Cluster, kind: str, message: str | Promise | Message, level: str = "info"
) -> ClusterEvent:
    """Record an event; a Message is kept as its template and parameters, so each reader sees it
    in their language (``ClusterEvent.shown``), and in English in ``message``."""
    if isinstance(message, Message):
        with translation.override("en"):
            english = str(message)
        return ClusterEvent.objects.create(
            cluster=cluster, kind=kind, message=english, text=message_to_json(message), level=level
        )
    # A lazy string is saved as its text, like a str.
    return ClusterEvent.objects.create(cluster=cluster, kind=kind, message=cast(str, message), level=level)
