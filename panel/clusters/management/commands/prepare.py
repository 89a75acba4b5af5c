"""`make run`'s preparation in one process: migrate, check, collectstatic, ensureadmin, in that order.

scripts/run.py ran them as four manage.py processes, each loading Django and every app (about a
second each on two cores) before it did anything; one process loads them once. A step that fails
stops here, naming itself, and the later steps do not run: as before, nothing starts.
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

STEPS = ("migrate", "check", "collectstatic", "ensureadmin")


class Command(BaseCommand):
    help = "Prepare the panel for make run: migrate, check, collectstatic and ensureadmin, in one process."
    # migrate checks before it migrates, and `check` is a step of its own after it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url", help="Address shown in ensureadmin's login hint (default: from PANEL_BIND)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        arguments: dict[str, dict[str, Any]] = {
            "migrate": {"interactive": False},
            "check": {},
            "collectstatic": {"interactive": False, "verbosity": 0},
            "ensureadmin": {"url": options["url"]} if options["url"] else {},
        }
        for step in STEPS:
            try:
                call_command(step, **arguments[step])
            except CommandError as exc:
                raise CommandError(f"manage.py {step} failed: {exc}") from exc
