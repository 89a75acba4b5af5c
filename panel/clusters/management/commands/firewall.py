"""`manage.py firewall …`: a cluster's trusted sources from the command line, applied now.

The same service functions as the Settings tab and the API's ``PUT …/firewall``: every value is
checked before anything changes, then pg_hba.conf and PgBouncer's hba file are rewritten and
reloaded (no restart). A cluster with no trusted source accepts connections from anywhere.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.management.cli import PanelCommand, cluster_subcommands, find_cluster, print_table
from panel.clusters.services import firewall


class Command(PanelCommand):
    help = "List and change the trusted sources (IP addresses and CIDR ranges) of a cluster."
    field_labels = {"source": "VALUE"}

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser)

        add("list", "List the trusted sources (none: connections from anywhere).")
        p = add(
            "set", "Replace every trusted source with VALUE… (--clear: accept connections from anywhere)."
        )
        p.add_argument("values", nargs="*", metavar="VALUE", help="an IP address or a CIDR range")
        p.add_argument("--clear", action="store_true", help="remove every trusted source")
        p = add("add", "Trust one more IP address or CIDR range.")
        p.add_argument("value", metavar="VALUE")
        p = add("remove", "Stop trusting an IP address or CIDR range.")
        p.add_argument("value", metavar="VALUE")

    def do_list(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        sources = list(cluster.trusted_sources.order_by("created_at", "value"))
        if not sources:
            self.stdout.write(f"{cluster.name} has no trusted source: it accepts connections from anywhere.")
            return
        rows = [(source.value, f"{source.created_at:%Y-%m-%d %H:%M:%S} UTC") for source in sources]
        print_table(self.stdout, ("SOURCE", "ADDED"), rows)

    def do_set(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        values = options["values"]
        if options["clear"] and values:
            raise CommandError("Give either VALUE… or --clear, not both.")
        if not options["clear"] and not values:
            raise CommandError(
                "Give at least one VALUE, or --clear to accept connections from anywhere again."
            )
        self._done(cluster.name, firewall.set_trusted_sources(cluster, values))

    def do_add(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        self._done(cluster.name, firewall.add_trusted_source(cluster, options["value"]))

    def do_remove(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        self._done(cluster.name, firewall.remove_trusted_source(cluster, options["value"]))

    def _done(self, name: str, sources: list[str]) -> None:
        if sources:
            self.stdout.write(
                self.style.SUCCESS(f"{name} accepts connections from {', '.join(sources)} only.")
            )
        else:
            self.stdout.write(self.style.SUCCESS(f"{name} accepts connections from anywhere."))
