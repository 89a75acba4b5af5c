"""Prepare the unprivileged user make run's web server runs as when make run runs as root.

Creates the system user PANEL_WEB_USER (``pgpanel``) if needed and prints its uid and gid as
JSON for scripts/run.py; with ``--share``, once make run knows that user can run the panel, gives
it the metadata database's directory and read access to keys/ (panel.files.share_with_web_user). Cluster directories, sockets and processes stay closed to it: the web
server sends that work to the node agent (panel/core/agent.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from panel import files
from panel.core import osusers
from panel.core.runas import EngineError


class Command(BaseCommand):
    help = "As root: create the web server's user (and with --share, give it the metadata database and keys)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--share", action="store_true", help="give it db/ and read access to keys/")

    def handle(self, *args: Any, **options: Any) -> None:
        if os.geteuid() != 0:
            raise CommandError("Only root prepares a web user; as another user the web server runs as you.")
        try:
            user = osusers.ensure_system_user(settings.PANEL_WEB_USER)
        except EngineError as exc:
            raise CommandError(str(exc)) from None
        if options["share"]:
            files.share_with_web_user(Path(settings.PANEL_DATA_DIR), user.uid, user.gid)
        else:
            self.stdout.write(json.dumps({"user": user.name, "uid": user.uid, "gid": user.gid}))
