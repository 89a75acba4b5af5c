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
from panel.core.errors import shown_text

# How long `cluster resize` follows a resize another node's worker does.
RESIZE_WAIT_SECONDS = 600


class SettingsSubcommands(PanelCommand):
    field_labels = {"size": "--size", "num_nodes": "--num-nodes", "config": "--set"}

    def add_settings_arguments(self, add: Callable[..., argparse.ArgumentParser]) -> None:
        p = add("resize", "Move a cluster to another plan, or change its number of nodes (standbys).")
        p.add_argument("--size", metavar="SLUG", help="the new plan, e.g. db-s-2vcpu-4gb")
        p.add_argument(
            "--num-nodes", type=int, metavar="N", help="members: 1, or 2-3 for a primary with standbys"
        )
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
        size, num_nodes = options["size"], options["num_nodes"]
        if size is None and num_nodes is None:
            raise CommandError("Give --size, --num-nodes or both.")
        if num_nodes is not None and num_nodes != cluster.num_nodes:
            self.stdout.write(f"Changing {cluster.name} from {cluster.num_nodes} to {num_nodes} node(s)…")
        else:
            self.stdout.write(f"Resizing {cluster.name} from {cluster.plan_slug} to {size}…")
        cluster = resize.resize_cluster(
            cluster, size or cluster.plan_slug, enqueue=not here, num_nodes=num_nodes
        )
        if not here:

            def done() -> bool:
                cluster.refresh_from_db()
                return cluster.status != ClusterStatus.RESIZING

            assert cluster.node is not None  # queued to a node's worker
            self.stdout.write(f"  queued on node {cluster.node.name}'s worker")
            polling.wait_for(done, RESIZE_WAIT_SECONDS, interval=0.5)
        if cluster.status != ClusterStatus.ONLINE or cluster.error_message:
            raise CommandError(shown_text(cluster.error_message) or f"{cluster.name} is {cluster.status}.")
        self.stdout.write(
            self.style.SUCCESS(
                f"{cluster.name} is online on {cluster.plan_slug} ({cluster.max_connections} connections), "
                f"{cluster.num_nodes} node(s)."
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
