"""Celery task: this node's forwarding round (beat's fan-out sends it to every node)."""

from __future__ import annotations

from celery import shared_task

from panel.logsink.services import forward


@shared_task(name="panel.logsink.tasks.forward")
def forward_logs() -> int:
    return forward.forward_round()
