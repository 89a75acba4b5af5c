"""The Celery application: tasks carry only row ids; the database row is the record."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery, Task
from celery.exceptions import Ignore
from celery.signals import before_task_publish

from panel import signing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")

log = logging.getLogger(__name__)


class SealedTask(Task):
    """Every task of the panel: its body runs only for a message whose signed seal matches its
    headers, names a queue this worker consumes, has not expired and has not run before
    (panel/signing.py)."""

    def before_start(self, task_id: str, args: Any, kwargs: Any) -> None:
        if self.request.is_eager:  # called in this process: no message to trust
            return
        reason = signing.refusal(self.name, self.request, set(self.app.amqp.queues.consume_from))
        if reason is not None:
            # The id and name are the message's own words: repr keeps a line break out of the log.
            log.warning("refused the task message %r[%r]: %s", self.name, task_id, reason)
            raise Ignore()


app = Celery("panel", task_cls=SealedTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _sign_messages(sender: Celery, **_kwargs: object) -> None:
    """Sign what this process sends and take only signed messages (the settings name the key)."""
    sender.setup_security()


@before_task_publish.connect
def _seal(
    body: object = None, headers: dict[str, Any] | None = None, routing_key: str = "", **_kwargs: object
) -> None:
    """Put the headers that decide what runs, and the queue, into the body the key signs
    (panel/signing.py)."""
    signing.seal(body, headers or {}, routing_key)
