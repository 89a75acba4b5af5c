"""`manage.py replica …`: read-only replicas of a cluster, with the web's and the API's services.

replica create CLUSTER --name R [--plan P]     made in the foreground; returns once it streams
replica list CLUSTER                           name, status, plan, node, port, lag
replica connection CLUSTER R [--format uri]    the replica's own connection details
replica promote CLUSTER --name R               a cluster of its own that accepts writes
replica delete CLUSTER --name R --yes          processes, files, system user, rows: all gone
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters import services
from panel.clusters.lib.connstr import FORMATS
from panel.clusters.management.cli import (
    PanelCommand,
    cluster_subcommands,
    find_cluster,
    human_size,
    print_table,
)
from panel.clusters.replicas.services import replicas


class Command(PanelCommand):
    help = "Create, list, promote and delete read-only replicas of a cluster."
    field_labels = {"name": "--name", "plan": "--plan"}

    def add_arguments(self, parser: CommandParser) -> None:
        add_cluster = cluster_subcommands(parser, "cluster", "the source cluster's name")

        def add(name: str, help_text: str, *, named: bool = True) -> argparse.ArgumentParser:
            p = add_cluster(name, help_text)
            if named:
                p.add_argument("--name", required=True, help="the replica's name")
            return p

        p = add("create", "Add a read-only replica; returns once it streams from the cluster.")
        p.add_argument("--plan", help="the replica's plan (default and minimum: the cluster's)")
        add("list", "List the cluster's read-only replicas with their lag.", named=False)
        p = add("delete", "Delete a replica: its processes, files, system user and rows.")
        p.add_argument("--yes", action="store_true", help="confirm the deletion")
        add("promote", "Promote a replica to a cluster of its own that accepts writes.")
        p = add("connection", "Print the replica's connection details, password included.", named=False)
        p.add_argument("replica", metavar="REPLICA", help="the replica's name")
        p.add_argument("--user", help="user (default: the admin user)")
        p.add_argument("--database", help="database (default: the default database)")
        p.add_argument("--format", dest="fmt", choices=FORMATS, default="uri")

    def do_create(self, options: dict[str, Any]) -> None:
        source = find_cluster(options["cluster"], options.get("owner"))
        replica = replicas.add_replica(source, name=options["name"], plan_slug=options["plan"])
        self.stdout.write(
            self.style.SUCCESS(
                f"Replica {replica.name} of {source.name} is online on node {replica.node}, port {replica.port}."
            )
        )

    def do_list(self, options: dict[str, Any]) -> None:
        source = find_cluster(options["cluster"], options.get("owner"))
        rows = [
            (
                row.replica.name,
                replicas.status_word_for_api(row.replica),
                row.replica.plan_slug,
                row.replica.node.name if row.replica.node else "-",
                str(row.replica.port or ""),
                row.state or "-",
                "-" if row.lag_bytes is None else human_size(row.lag_bytes),
            )
            for row in replicas.list_replicas(source)
        ]
        print_table(self.stdout, ("NAME", "STATUS", "PLAN", "NODE", "PORT", "STREAM", "LAG"), rows)

    def do_connection(self, options: dict[str, Any]) -> None:
        source = find_cluster(options["cluster"], options.get("owner"))
        replica = replicas.get_replica(source, options["replica"])
        details = services.connection_details(replica, user=options["user"], database=options["database"])
        self.stdout.write(details.render(options["fmt"]))

    def do_promote(self, options: dict[str, Any]) -> None:
        source = find_cluster(options["cluster"], options.get("owner"))
        replica = replicas.promote_replica(replicas.get_replica(source, options["name"]))
        self.stdout.write(
            self.style.SUCCESS(f"{replica.name} is now a cluster of its own; it accepts writes.")
        )

    def do_delete(self, options: dict[str, Any]) -> None:
        source = find_cluster(options["cluster"], options.get("owner"))
        replica = replicas.get_replica(source, options["name"])
        if not options["yes"]:
            raise CommandError(f"Deleting {replica.name} removes it and its data; add --yes to confirm.")
        replicas.delete_replica(replica, foreground=True)
        self.stdout.write(self.style.SUCCESS(f"Replica {replica.name} deleted."))
