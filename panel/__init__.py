"""The Managed PostgreSQL control panel (Django project package)."""

from __future__ import annotations

from panel.celery import app as celery_app

__all__ = ["celery_app"]
