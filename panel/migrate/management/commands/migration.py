"""`manage.py migration …`: a cluster's online migration from the command line.

    migration start CLUSTER --host H [--port P] --dbname D --username U [--disable-ssl] [--ignore-db N]…
    migration status CLUSTER
    migration stop CLUSTER [MIGRATION_ID]

The same services as the Migration page and the API. The source's password is read from the
environment variable MIGRATION_SOURCE_PASSWORD, or from the first line of standard input: never
from the command line, where every user of the machine could read it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster, print_table
from panel.migrate.services import actions, cutover

PASSWORD_VARIABLE = "MIGRATION_SOURCE_PASSWORD"


class Command(PanelCommand):
    help = "Start, follow and stop (cut over) an online migration into a cluster."
    field_labels = {"host": "--host", "port": "--port", "dbname": "--dbname", "username": "--username",
                    "ignore_dbs": "--ignore-db", "password": PASSWORD_VARIABLE}  # fmt: skip

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser)

        p = add(
            "start",
            f"Start migrating a source server into CLUSTER (password: ${PASSWORD_VARIABLE} or stdin).",
        )
        p.add_argument("--host", required=True)
        p.add_argument("--port", type=int, default=5432)
        p.add_argument("--dbname", required=True, help="the database to connect to on the source")
        p.add_argument("--username", required=True)
        p.add_argument("--disable-ssl", action="store_true", help="connect to the source without SSL")
        p.add_argument(
            "--ignore-db", action="append", default=[], metavar="NAME", help="a database to leave out"
        )
        add("status", "Show the newest migration into CLUSTER, with the lag per database.")
        p = add("stop", "Cut over (once syncing) or cancel the running migration.")
        p.add_argument("migration_id", nargs="?", metavar="MIGRATION_ID", help="default: the running one")

    def do_start(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        password = os.environ.get(PASSWORD_VARIABLE)
        if password is None:
            password = sys.stdin.readline().rstrip("\n")
        migration = actions.start_migration(
            cluster,
            host=options["host"],
            port=options["port"],
            dbname=options["dbname"],
            username=options["username"],
            password=password,
            disable_ssl=options["disable_ssl"],
            ignore_dbs=options["ignore_db"],
        )
        self.stdout.write(f"Migration {migration.pk} started: {', '.join(migration.databases)}.")

    def do_status(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        state = cutover.migration_status(cluster)
        if state is None:
            self.stdout.write(f"No online migration into {cluster.name}.")
            return
        self.stdout.write(f"Migration {state.id} from {state.source}: {state.status}")
        if state.message:
            self.stdout.write(state.message)
        if state.error:
            self.stdout.write(f"Error: {state.error}")
        rows = [(db.name, f"{db.tables_ready}/{db.tables}", db.lag) for db in state.databases]
        print_table(self.stdout, ("DATABASE", "TABLES", "LAG"), rows)

    def do_stop(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        migration_id = options.get("migration_id")
        if not migration_id:
            current = actions.latest(cluster)
            if current is None or not current.is_active:
                raise CommandError(f"No migration into {cluster.name} is running.")
            migration_id = str(current.pk)
        migration = cutover.stop_migration(cluster, migration_id)
        self.stdout.write(f"Migration {migration.pk}: {migration.status}.")
