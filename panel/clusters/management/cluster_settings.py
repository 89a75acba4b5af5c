"""Parts of ``manage.py cluster``: ``resize`` (another plan) and ``config`` (the owner's PostgreSQL
settings), calling the same services as the Settings tab and the API."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from panel.clusters.lib import tunables
from panel.clusters.management.cli import PanelCommand, find_cluster
from panel.clusters.models import ClusterStatus
from panel.clusters.services import config, resize
from panel.core import polling

# How long `cluster resize` follows a resize another node's worker does.
RESIZE_WAIT_SECONDS = 600


class SettingsSubcommands(PanelCommand):
    field_labels = {"size": "--size", "config": "--set"}

    def add_settings_arguments(self, add: Callable[..., argparse.ArgumentParser]) -> None:
        p = add("resize", "Move a cluster to another plan (PostgreSQL restarts).")
        p.add_argument("--size", required=True, metavar="SLUG", help="the new plan, e.g. db-s-2vcpu-4gb")
        p = add("config", "Print a cluster's PostgreSQL settings, or change some with --set.")
        p.add_argument(
            "--set",
            dest="assignments",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a setting to change (repeat for more); applied with a reload",
        )

    def do_resize(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        here = cluster.node is None or cluster.node.is_here
        self.stdout.write(f"Resizing {cluster.name} from {cluster.plan_slug} to {options['size']}…")
        cluster = resize.resize_cluster(cluster, options["size"], enqueue=not here)
        if not here:

            def done() -> bool:
                cluster.refresh_from_db()
                return cluster.status != ClusterStatus.RESIZING

            self.stdout.write(f"  queued on node {cluster.node.name}'s worker")
            polling.wait_for(done, RESIZE_WAIT_SECONDS, interval=0.5)
        if cluster.status != ClusterStatus.ONLINE or cluster.error_message:
            raise CommandError(cluster.error_message or f"{cluster.name} is {cluster.status}.")
        self.stdout.write(
            self.style.SUCCESS(
                f"{cluster.name} is online on {cluster.plan_slug} ({cluster.max_connections} connections)."
            )
        )

    def do_config(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        if options["assignments"]:
            changes = {}
            for assignment in options["assignments"]:
                key, sep, value = assignment.partition("=")
                if not sep:
                    raise CommandError(f"--set takes KEY=VALUE, not {assignment!r}.")
                changes[key.strip()] = tunables.parse_text(key.strip(), value)
            values = config.update_config(cluster, changes)
            self.stdout.write(self.style.SUCCESS(f"{cluster.name}: configuration changed."))
        else:
            values = config.current_config(cluster)
        for tunable in tunables.TUNABLES:
            value = values[tunable.name]
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            unit = f" {tunable.unit}" if tunable.unit else ""
            mark = "" if tunable.name in cluster.config else "  (default)"
            self.stdout.write(f"{tunable.name:<37} {shown}{unit}{mark}")
