"""The Celery application: tasks carry only row ids; the database row is the record."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")

app = Celery("panel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _sign_messages(sender: Celery, **_kwargs: object) -> None:
    """Sign what this process sends and take only signed messages (the settings name the key)."""
    sender.setup_security()
