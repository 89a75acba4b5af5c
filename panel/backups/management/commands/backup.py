"""`manage.py backup …`: a cluster's backups from the command line, in the foreground.

backup list CLUSTER                              # the repository's backups and the recovery window
backup create CLUSTER [--type full|diff|incr]    # take one now
backup restore CLUSTER --to NEW [--time ISO8601] [--plan SLUG]   # no --time: the latest point (fork)
backup encrypt-secret < key.txt                  # an S3 secret key, for PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.template.defaultfilters import filesizeformat

from panel import crypto
from panel.backups.lib import pgbackrest
from panel.backups.services import backups, restore
from panel.clusters.face import PanelCommand, find_cluster


def parse_time(text: str) -> dt.datetime:
    """ISO 8601; without a zone it is UTC."""
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--time: {text!r} is not an ISO 8601 date and time (e.g. 2026-11-25T18:05:00Z)."
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


class Command(PanelCommand):
    help = "Backups of a cluster: list them, take one, restore them into a new cluster."
    field_labels = {"time": "--time", "name": "--to", "plan": "--plan", "backup_type": "--type"}

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for name, text in (
            ("list", "List the backups and the recovery window."),
            ("create", "Take a backup now (in the foreground)."),
            ("restore", "Restore into a new cluster at --time (UTC) or at the latest point."),
        ):
            p = sub.add_parser(name, help=text, description=text)
            p.add_argument("cluster", metavar="CLUSTER", help="cluster name")
            p.add_argument("--owner", metavar="USERNAME", help="the cluster owner's username")
            if name == "create":
                p.add_argument("--type", dest="backup_type", choices=pgbackrest.BACKUP_TYPES, default="full")
            if name == "restore":
                p.add_argument(
                    "--to", dest="new_name", required=True, metavar="NEW", help="the new cluster's name"
                )
                p.add_argument("--time", metavar="ISO8601", help="the moment to restore to (default: latest)")
                p.add_argument(
                    "--plan", metavar="SLUG", help="the new cluster's plan (default: the source's)"
                )
        sub.add_parser(
            "encrypt-secret",
            help="Read an S3 secret key on stdin; print it encrypted for PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED.",
        )

    def needs_database(self, options: dict[str, Any]) -> bool:
        return options.get("subcommand") != "encrypt-secret"

    def do_encrypt_secret(self, options: dict[str, Any]) -> None:
        secret = sys.stdin.readline().strip()
        if not secret:
            raise CommandError("Give the secret key on stdin (it is never taken from argv).")
        self.stdout.write(crypto.encrypt(secret))

    def do_list(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        page = backups.page(cluster)
        if page.problem:
            raise CommandError(str(page.problem))
        self.stdout.write(backups.schedule_text())
        if page.window_start:
            self.stdout.write(f"Restorable from {page.window_start:%Y-%m-%d %H:%M:%S} UTC to now.")
        else:
            self.stdout.write("No backup yet.")
        if page.archive is not None and page.archive.needs_restart:
            self.stdout.write("Restart the cluster to enable backups.")
        for b in page.backups:
            self.stdout.write(
                f"{b.label}  {b.type:<4}  {b.started_at:%Y-%m-%d %H:%M:%S} → {b.stopped_at:%H:%M:%S}  "
                f"{filesizeformat(b.size)} (repo {filesizeformat(b.repo_size)})  WAL {b.wal_start}–{b.wal_stop}"
            )

    def do_create(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        job = backups.create_backup(cluster, options["backup_type"])
        self.stdout.write(
            self.style.SUCCESS(f"Backup {job.label} of {cluster.name} taken ({job.backup_type}).")
        )

    def do_restore(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        moment = parse_time(options["time"]) if options.get("time") else None
        new = restore.restore_cluster(
            cluster,
            cluster.owner,
            name=options["new_name"],
            target_time=moment,
            plan_slug=options.get("plan"),
        )
        when = f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "the latest point"
        self.stdout.write(
            self.style.SUCCESS(f"Cluster {new.name} restored from {cluster.name} at {when}, port {new.port}.")
        )
