"""`manage.py pool …`: connection pools from the command line, with the web's validation and service.

Clusters are named by their name, as in ``manage.py cluster``; when several users own a cluster of
that name, ``--owner`` picks one.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster
from panel.clusters.lib.connstr import FORMATS
from panel.pools import services
from panel.pools.models import ConnectionPool, PoolMode


class Command(PanelCommand):
    help = "Create, inspect, change and delete PgBouncer connection pools of a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        add_cluster = cluster_subcommands(parser, "cluster")

        def add(name: str, help_text: str, *, pool: bool = True) -> argparse.ArgumentParser:
            p = add_cluster(name, help_text)
            if pool:
                p.add_argument("pool", metavar="NAME", help="pool name")
            return p

        p = add("create", "Create a pool; returns once PgBouncer serves it.")
        p.add_argument("--database", required=True, help="database the pool connects to")
        p.add_argument("--user", default="", help="fixed user (default: the inbound user)")
        p.add_argument("--mode", choices=PoolMode.values, default=PoolMode.TRANSACTION)
        p.add_argument("--size", required=True, type=int, help="server connections of the pool")

        add("list", "List the pools of a cluster with the budget and live figures.", pool=False)
        add("show", "Show one pool with its live figures.")

        p = add("update", "Change a pool in place (the name is immutable); omitted options keep their value.")
        p.add_argument("--database")
        users = p.add_mutually_exclusive_group()
        users.add_argument("--user", help="fixed user")
        users.add_argument("--inbound-user", action="store_true", help="use the connecting user")
        p.add_argument("--mode", choices=PoolMode.values)
        p.add_argument("--size", type=int)

        p = add("delete", "Delete a pool; its connected clients are disconnected.")
        p.add_argument("--yes", action="store_true", help="confirm the deletion")

        add(
            "release",
            "Close the server connections the pool keeps idle (RECONNECT); its clients stay connected.",
        )

        p = add("connection", "Print the pool's connection details, password included.")
        p.add_argument("--user", help="user for an inbound-user pool (default: the admin user)")
        p.add_argument("--format", dest="fmt", choices=FORMATS, default="uri")

    # --- lookups -------------------------------------------------------------------------------

    def _pool(self, options: dict[str, Any]) -> ConnectionPool:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        try:
            return cluster.pools.select_related("cluster").get(name=options["pool"])
        except ConnectionPool.DoesNotExist:
            raise CommandError(f"No pool named {options['pool']!r} on {cluster.name}.") from None

    # --- subcommands ---------------------------------------------------------------------------

    def do_create(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        pool = services.create_pool(
            cluster, options["pool"], options["database"], options["user"], options["mode"], options["size"]
        )
        used, total = services.pool_budget(cluster)
        self.stdout.write(self.style.SUCCESS(f"Pool {pool.name} serves on port {cluster.pooler_port}."))
        self.stdout.write(f"{used} of {total} connections allocated to pools.")
        self.stdout.write(f"Connect with: manage.py pool connection {cluster.name} {pool.name}")

    def do_list(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["cluster"], options.get("owner"))
        overview = services.pools_overview(cluster)
        self.stdout.write(f"{overview.used} of {overview.total} connections allocated to pools.")
        state = "running" if overview.running else "not running"
        self.stdout.write(f"PgBouncer on port {cluster.pooler_port}: {state}.")
        if overview.error_message:
            self.stdout.write(self.style.ERROR(f"Last error: {overview.error_message}"))
        if not overview.pools:
            self.stdout.write("No pools.")
            return
        header = (
            "NAME",
            "DATABASE",
            "USER",
            "MODE",
            "SIZE",
            "CLIENTS",
            "WAITING",
            "SERVERS",
            "IDLE",
            "MAXWAIT",
        )
        rows = []
        for pool, stats in overview.pools:
            live = (
                ("-",) * 5
                if stats is None
                else (
                    str(stats.clients_active),
                    str(stats.clients_waiting),
                    str(stats.servers_active),
                    str(stats.servers_idle),
                    f"{stats.max_wait_seconds:.1f}s",
                )
            )
            rows.append(
                (pool.name, pool.database, pool.user or "(inbound)", pool.mode, str(pool.size), *live)
            )
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

    def do_show(self, options: dict[str, Any]) -> None:
        pool = self._pool(options)
        stats = (services.pool_stats(pool.cluster) or {}).get(pool.name)
        lines = [
            ("Name", pool.name),
            ("Cluster", pool.cluster.name),
            ("Database", pool.database),
            ("User", pool.user or "inbound user (whoever connects)"),
            ("Mode", pool.mode),
            ("Size", str(pool.size)),
            ("Pooler port", str(pool.cluster.pooler_port)),
            ("Created", f"{pool.created_at:%Y-%m-%d %H:%M:%S %Z}"),
        ]
        if stats is None:
            lines.append(("Live", "PgBouncer is not running"))
        else:
            lines += [
                ("Clients", f"{stats.clients_active} active, {stats.clients_waiting} waiting"),
                ("Servers", f"{stats.servers_active} active, {stats.servers_idle} idle"),
                ("Max wait", f"{stats.max_wait_seconds:.1f} s"),
            ]
        width = max(len(label) for label, _ in lines)
        for label, value in lines:
            self.stdout.write(f"{label + ':':<{width + 1}} {value}")

    def do_update(self, options: dict[str, Any]) -> None:
        pool = self._pool(options)
        user = pool.user if options["user"] is None else options["user"]
        if options["inbound_user"]:
            user = ""
        pool = services.update_pool(
            pool,
            options["database"] or pool.database,
            user,
            options["mode"] or pool.mode,
            pool.size if options["size"] is None else options["size"],
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Pool {pool.name}: {pool.database}, {pool.user or 'inbound user'}, {pool.mode}, size {pool.size}."
            )
        )

    def do_delete(self, options: dict[str, Any]) -> None:
        pool = self._pool(options)
        if not options["yes"]:
            clients = services.connected_clients(pool)
            raise CommandError(
                f"Deleting {pool.name} disconnects its {clients} connected client(s) at once. "
                f"Confirm with: manage.py pool delete {pool.cluster.name} {pool.name} --yes"
            )
        clients = services.delete_pool(pool)
        self.stdout.write(self.style.SUCCESS(f"Pool {pool.name} deleted; {clients} client(s) disconnected."))

    def do_release(self, options: dict[str, Any]) -> None:
        pool = self._pool(options)
        released = services.release_pool(pool)
        self.stdout.write(
            self.style.SUCCESS(f"Pool {pool.name}: {released} idle server connection(s) closed.")
        )

    def do_connection(self, options: dict[str, Any]) -> None:
        pool = self._pool(options)
        details = services.pool_connection_details(pool, options["user"])
        self.stdout.write(details.render(options["fmt"]))
