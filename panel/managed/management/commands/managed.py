"""`manage.py managed …`: the managed service's extras from the command line, through the same
services as the API and the Settings tab.

managed window CLUSTER [DAY HOUR]                  # show, or set (HOUR: 14 or 14:00, UTC)
managed updates CLUSTER [--install]                # ask the node what is pending; install it now
managed autoscale CLUSTER [--on | --off] [--threshold N] [--increment GIB] [--check]
managed tags CLUSTER [TAG …]                       # show, or replace
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster
from panel.managed.services import autoscale, maintenance, tags


class Command(PanelCommand):
    help = "Maintenance window and updates, storage autoscale and tags of a cluster."
    field_labels = {
        "day": "DAY",
        "hour": "HOUR",
        "threshold_percent": "--threshold",
        "increment_gib": "--increment",
        "tags": "TAG",
    }

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser, "cluster")

        p = add("window", "Show or set the weekly maintenance window (UTC).")
        p.add_argument("day", nargs="?", metavar="DAY", help="monday … sunday")
        p.add_argument("hour", nargs="?", metavar="HOUR", help="0-23, or 14:00")
        p = add("updates", "Ask the node which updates are pending; --install restarts onto them now.")
        p.add_argument("--install", action="store_true", help="install the pending updates now")
        p = add("autoscale", "Show or change storage autoscale; --check runs the check now.")
        state = p.add_mutually_exclusive_group()
        state.add_argument("--on", dest="enabled", action="store_true", default=None)
        state.add_argument("--off", dest="enabled", action="store_false")
        p.add_argument("--threshold", type=int, metavar="PERCENT")
        p.add_argument("--increment", type=int, metavar="GIB")
        p.add_argument("--check", action="store_true", help="check the disk now (and scale up if past)")
        p = add("tags", "Show or replace the cluster's tags.")
        p.add_argument("tags", nargs="*", metavar="TAG")

    def do_window(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        if options["day"] is not None:
            maintenance.set_window(cluster, options["day"], options["hour"] or "")
        row = maintenance.window_of(cluster)
        self.stdout.write(f"Maintenance window: {row.day} {row.hour:02d}:00 UTC.")

    def do_updates(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        waiting = maintenance.check_updates(cluster)
        for line in waiting or ["No update pending."]:
            self.stdout.write(line)
        if options["install"] and waiting:
            maintenance.perform_update(cluster.pk)
            self.stdout.write(self.style.SUCCESS("Updates installed."))

    def do_autoscale(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        row = autoscale.autoscale_of(cluster)
        if (
            options["enabled"] is not None
            or options["threshold"] is not None
            or options["increment"] is not None
        ):
            row = autoscale.set_autoscale(
                cluster,
                enabled=row.enabled if options["enabled"] is None else options["enabled"],
                threshold_percent=options["threshold"],
                increment_gib=options["increment"],
            )
        state = "on" if row.enabled else "off"
        self.stdout.write(
            f"Storage autoscale {state}: past {row.threshold_percent}%, +{row.increment_gib} GiB."
        )
        if options["check"]:
            self.stdout.write(autoscale.check_cluster(cluster) or "Under the threshold: nothing to do.")

    def do_tags(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        if options["tags"]:
            tags.set_tags(cluster, options["tags"])
        self.stdout.write(" ".join(tags.tags_of(cluster)) or "(no tags)")
