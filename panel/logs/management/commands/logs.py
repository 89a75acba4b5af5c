"""`manage.py logs CLUSTER`: a cluster's log from the command line, as the Logs tab shows it.

logs CLUSTER [--source postgres|pooler] [--level ERROR] [--search TEXT] [--lines N] [--follow]
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.face import PanelCommand, find_cluster
from panel.core.errors import ServiceError
from panel.logs import services
from panel.logs.lib.logfile import LogEntry

FOLLOW_SECONDS = 1.0


def pause() -> None:
    """Between two reads of --follow."""
    time.sleep(FOLLOW_SECONDS)


class Command(PanelCommand):
    help = "Print a cluster's PostgreSQL or PgBouncer log, newest last; --follow keeps printing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster", metavar="CLUSTER", help="cluster name")
        parser.add_argument("--owner", metavar="USERNAME", help="the cluster owner's username")
        parser.add_argument("--source", choices=sorted(services.SOURCES), default=services.POSTGRES)
        parser.add_argument("--level", default="", help="only entries with a line at this level (ERROR…)")
        parser.add_argument("--search", default="", metavar="TEXT", help="only entries holding TEXT")
        parser.add_argument(
            "--lines", type=int, default=50, metavar="N", help="how many entries (default 50)"
        )
        parser.add_argument("--follow", "-f", action="store_true", help="keep printing new entries")

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = find_cluster(options["cluster"], options["owner"])
        if options["lines"] < 1:
            raise CommandError("--lines must be at least 1.")
        filters = {"level": options["level"], "search": options["search"]}
        try:
            page = services.read_log(cluster, options["source"], limit=options["lines"], **filters)
            if page.older_not_read:
                self.stderr.write("(older lines were not read: the newest part of the log only)")
            self._print(reversed(page.entries))
            cursor = page.cursor
            while options["follow"]:
                pause()
                page = services.read_log(cluster, options["source"], after=cursor, **filters)
                self._print(reversed(page.entries))
                cursor = page.cursor or cursor
        except ServiceError as exc:
            raise CommandError(exc.message) from None
        except KeyboardInterrupt:
            return

    def _print(self, entries: Any) -> None:
        entry: LogEntry
        for entry in entries:
            self.stdout.write(entry.text)
        # Followed output goes to a pipe or a file as it comes, not when a buffer fills.
        self.stdout.flush()
