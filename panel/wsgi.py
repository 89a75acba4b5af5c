"""WSGI entry point (gunicorn in production, runserver locally)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")
application = get_wsgi_application()
