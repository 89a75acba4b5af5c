"""Django's compilemessages, and the compiled catalogues readable by every user afterwards: it
runs in a process of the panel (umask 077), and the web server, which make run starts as another
user when it runs as root, must read them (a German page was a 500 otherwise)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.commands import compilemessages

from panel import files


class Command(compilemessages.Command):
    def handle(self, **options: Any) -> None:
        super().handle(**options)
        report = files.share_checkout_with_web(Path(settings.BASE_DIR), dirs=("locale",))
        for problem in report.problems:
            self.stderr.write(f"{problem.message} Run: {problem.fix}")
