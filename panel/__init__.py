"""The Managed PostgreSQL control panel (Django project package)."""

from __future__ import annotations

import os

# Every entry point imports this package before anything else of the panel: manage.py and
# gunicorn through DJANGO_SETTINGS_MODULE=panel.settings and panel.wsgi, Celery through
# `celery -A panel`. Setting the umask here, before the settings create keys and before the
# SQLite file, schedules and logs are opened, makes everything the panel writes private unless
# the code says otherwise with an explicit mode (static files, clusters/, the guard library).
# Children inherit it: PostgreSQL, PgBouncer and pgbench also start with 077.
os.umask(0o077)

from panel.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
