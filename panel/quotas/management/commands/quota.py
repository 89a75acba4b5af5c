"""`manage.py quota …`: storage quotas from the command line, as setquota and repquota.

quota set CLUSTER (--database DB | --role ROLE) --soft SIZE --hard SIZE [--files-soft N --files-hard N]
quota remove CLUSTER (--database DB | --role ROLE)
quota grace CLUSTER SECONDS [SECONDS]          # as setquota -t: space, then relations
quota report CLUSTER [-s]                      # repquota's layout; -s: human sizes
quota measure CLUSTER                          # one cycle now (it runs every collection)
quota allow-writes CLUSTER (--database DB | --role ROLE)
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster
from panel.quotas import services
from panel.quotas.models import Quota, QuotaKind
from panel.quotas.services import reserve


class Command(PanelCommand):
    help = "Storage quotas of a cluster's databases and roles: set, report, grace periods."
    field_labels = {
        "space_soft": "--soft",
        "space_hard": "--hard",
        "files_soft": "--files-soft",
        "files_hard": "--files-hard",
        "database": "--database",
        "role": "--role",
        "space_grace": "SECONDS",
        "files_grace": "SECONDS",
    }

    def add_arguments(self, parser: CommandParser) -> None:
        add_cluster = cluster_subcommands(parser, "cluster")

        def add(name: str, help_text: str, *, target: bool = False) -> argparse.ArgumentParser:
            p = add_cluster(name, help_text)
            if target:
                which = p.add_mutually_exclusive_group(required=True)
                which.add_argument("--database", metavar="DB", help="a database of the cluster")
                which.add_argument("--role", metavar="ROLE", help="a user (role) of the cluster")
            return p

        p = add(
            "set", "Set a quota (SIZE: bytes, or 100M, 2G…; 0 = no limit; all 0 removes it).", target=True
        )
        p.add_argument("--soft", default="0", metavar="SIZE", help="space soft limit")
        p.add_argument("--hard", default="0", metavar="SIZE", help="space hard limit")
        p.add_argument("--files-soft", default="0", metavar="N", help="relations soft limit")
        p.add_argument("--files-hard", default="0", metavar="N", help="relations hard limit")
        add("remove", "Remove a quota.", target=True)
        p = add("grace", "Set the grace periods in seconds (space, then relations), as setquota -t.")
        p.add_argument("seconds", nargs="+", metavar="SECONDS")
        p = add("report", "Print the quotas in repquota's layout.")
        p.add_argument("-s", "--human", action="store_true", help="human sizes (K, M, G) as repquota -s")
        add("measure", "Measure now and apply the result (each collection cycle does it too).")
        add("allow-writes", "Lift a stop for 15 minutes, once per grace period.", target=True)
        p = add_cluster(
            "reserve",
            "This node's emergency reserve: show it, or release it to give its space back now.",
            cluster=False,
        )
        p.add_argument("action", choices=("status", "release"))

    @staticmethod
    def _target(options: dict[str, Any]) -> tuple[str, str]:
        if options.get("database"):
            return QuotaKind.DATABASE, options["database"]
        return QuotaKind.ROLE, options["role"]

    def do_set(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        kind, name = self._target(options)
        quota = services.set_quota(
            cluster,
            kind,
            name,
            space_soft=options["soft"],
            space_hard=options["hard"],
            files_soft=options["files_soft"],
            files_hard=options["files_hard"],
        )
        if quota is None:
            self.stdout.write(f"No quota on {kind} {name} any more.")
            return
        self.stdout.write(
            self.style.SUCCESS(f"Quota on {kind} {name} set; state: {quota.get_state_display()}.")
        )

    def do_remove(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        kind, name = self._target(options)
        if not services.remove_quota(cluster, kind, name):
            raise CommandError(f"No quota on {kind} {name}.")
        self.stdout.write(f"Quota on {kind} {name} removed.")

    def do_grace(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        seconds = options["seconds"]
        if len(seconds) > 2:
            raise CommandError("Give one or two grace periods: space, then relations.")
        services.set_grace(cluster, seconds[0], seconds[1] if len(seconds) > 1 else None)
        storage = services.storage_of(cluster)
        self.stdout.write(
            f"Grace periods: {storage.space_grace_seconds} s (space), {storage.files_grace_seconds} s (relations)."
        )

    def do_report(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        self.stdout.write(services.report_text(cluster, human=options["human"]), ending="")

    def do_measure(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        changes = services.run_cycle(cluster)
        storage = services.storage_of(cluster)
        self.stdout.write(f"Measured in {storage.measure_ms or 0:.1f} ms of database time.")
        for change in changes:
            self.stdout.write(change)

    def needs_database(self, options: dict[str, Any]) -> bool:
        return options.get("subcommand") != "reserve"

    def do_reserve(self, options: dict[str, Any]) -> None:
        path = reserve.path()
        if options["action"] == "release":
            freed = reserve.release()
            self.stdout.write(
                f"Released {freed // (1024 * 1024)} MiB ({path}); it is made again once the disk has room."
            )
            return
        size = reserve.size()
        where = f"{size // (1024 * 1024)} MiB at {path}" if size else f"none (expected at {path})"
        self.stdout.write(
            f"Emergency reserve: {where}; volume {reserve.volume_percent(path.parent if path.parent.exists() else path.parents[1]):.1f} % used."
        )

    def do_allow_writes(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        kind, name = self._target(options)
        quota = Quota.objects.filter(cluster=cluster, kind=kind, name=name).first()
        if quota is None:
            raise CommandError(f"No quota on {kind} {name}.")
        quota = services.allow_writes(quota)
        self.stdout.write(f"Writes allowed until {quota.writes_allowed_until:%Y-%m-%d %H:%M:%S} UTC.")
