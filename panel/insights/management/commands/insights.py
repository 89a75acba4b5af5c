"""`manage.py insights …`: collect, roll up and prune metrics in the foreground; print the token."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.collector import Snapshot


class Command(BaseCommand):
    help = "Collect metrics now, roll up and prune them, or print the /metrics token."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        p = sub.add_parser("collect", help="Collect every cluster (or one) once, now.")
        p.add_argument("name", nargs="?", metavar="CLUSTER", help="cluster name (default: all)")
        p.add_argument("--owner", metavar="USERNAME", help="the cluster owner's username")
        sub.add_parser("prune", help="Build 5-minute rollups and delete expired points.")
        sub.add_parser("token", help="Print the bearer token /metrics expects.")

    def handle(self, *args: object, **options: object) -> None:
        subcommand = options["subcommand"]
        if subcommand == "token":
            self.stdout.write(settings.PANEL_METRICS_TOKEN)
        elif subcommand == "prune":
            result = services.prune_and_rollup()
            self.stdout.write(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in result.items()))
        elif options["name"]:
            clusters = Cluster.objects.filter(name=options["name"])
            if options["owner"]:
                clusters = clusters.filter(owner__username=options["owner"])
            found = list(clusters[:2])
            if not found:
                raise CommandError(f"No cluster named {options['name']!r}.")
            if len(found) > 1:
                raise CommandError("Several users own a cluster of that name; add --owner.")
            self._report(found[0].name, services.collect_cluster(found[0]))
        else:
            names = {str(pk): name for pk, name in Cluster.objects.values_list("id", "name")}
            for cluster_id, snap in services.collect_all().items():
                self._report(names.get(cluster_id) or cluster_id, snap)

    def _report(self, name: str, snap: Snapshot) -> None:
        up = ", ".join(
            f"{source} {'ok' if ok else 'down: ' + snap.errors.get(source, '')}"
            for source, ok in sorted(snap.up.items())
        )
        self.stdout.write(
            f"{name}: {len(snap.gauges)} gauges, {len(snap.counters)} counters, "
            f"{snap.query_seconds * 1000:.1f} ms of queries; {up}"
        )
