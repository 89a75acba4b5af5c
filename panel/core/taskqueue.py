"""The one way the panel sends a Celery task: at once, or a ServiceError the form can show."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings

from panel.core.errors import N_, ServiceError

if TYPE_CHECKING:
    from celery.result import AsyncResult

log = logging.getLogger(__name__)


def enqueue_task(
    task_name: str, *args: str | int, queue: str | None = None, time_limit: float | None = None
) -> None:
    """Send a task now (on ``queue``, with a soft ``time_limit`` in seconds and a hard one 30 s
    later); a broker that does not answer becomes a ServiceError for the form."""
    options: dict[str, Any] = {}
    if queue is not None:
        options["queue"] = queue
    if time_limit is not None:
        options.update(soft_time_limit=int(time_limit), time_limit=int(time_limit) + 30)
    send(task_name, list(args), **options)


def send(task_name: str, args: list[Any], **options: Any) -> AsyncResult:
    """``send_task`` with Celery's ``options``, at once: a broker that does not answer is a
    ServiceError saying nothing was started (the node agent's calls use it too)."""
    from panel.celery import app

    try:
        with app.connection_for_write() as conn:
            # send_task(retry=False) still lets kombu retry the connection for ~6 s; give up at
            # the first refusal so the form answers at once.
            conn.ensure_connection(max_retries=0)
            return app.send_task(task_name, args=args, retry=False, connection=conn, **options)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        log.warning("could not enqueue %s: %s (%s)", task_name, type(exc).__name__, exc)
        raise ServiceError(
            N_(
                "The task queue (Redis at %(url)s) is not reachable, so nothing was started. Try again when it is back."
            ),
            code="agent.queue_unreachable",
            params={"url": settings.REDIS_URL.split("@")[-1]},
        ) from None
