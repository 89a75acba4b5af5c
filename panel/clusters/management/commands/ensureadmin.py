"""Create the first admin account once, and say how to log in.

`make run` calls this at every start: the first time it creates the superuser `admin` with a
generated password and prints that password once (only its hash is stored); afterwards it only
reminds how to log in.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

ADMIN_USERNAME = "admin"


def default_url() -> str:
    bind = os.environ.get("PANEL_BIND") or "127.0.0.1:8000"
    return f"http://{bind}/"


class Command(BaseCommand):
    help = "Create the superuser 'admin' with a generated password if no superuser exists yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url", default=default_url(), help="Address shown in the login hint (default: from PANEL_BIND)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        if user_model.objects.filter(is_superuser=True).exists():
            self.stdout.write(
                "Log in with your existing admin account "
                f"(reset with: .venv/bin/python manage.py changepassword {ADMIN_USERNAME})"
            )
            return
        if user_model.objects.filter(username=ADMIN_USERNAME).exists():
            raise CommandError(
                f"A user named {ADMIN_USERNAME!r} exists but is not a superuser, and no superuser "
                "exists. Create one with: .venv/bin/python manage.py createsuperuser"
            )
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(ADMIN_USERNAME, "", password)
        self.stdout.write(
            self.style.SUCCESS(
                f"Log in at {options['url']} as {ADMIN_USERNAME} with password {password}\n"
                "(shown only this once; change it with: "
                f".venv/bin/python manage.py changepassword {ADMIN_USERNAME})"
            )
        )
