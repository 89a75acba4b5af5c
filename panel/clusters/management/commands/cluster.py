"""`manage.py cluster …`: the panel's cluster actions from the command line, in the foreground.

Every subcommand calls the same service functions as the web pages and the Celery tasks, but
runs them here and now, so no worker is needed. Clusters are named by their name; when several
users own a cluster of that name, ``--owner`` picks one.
"""

from __future__ import annotations

import getpass
import os
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import CommandError, CommandParser
from django.db.models.signals import post_save

from panel.clusters import services
from panel.clusters.lib.connstr import FORMATS, SSLMODES
from panel.clusters.lib.hosts import InvalidHost, validate_host
from panel.clusters.management.cli import (
    PanelCommand,
    cluster_subcommands,
    find_cluster,
    find_user,
    print_table,
)
from panel.clusters.management.cluster_members import MemberSubcommands
from panel.clusters.management.cluster_parts import RoleSubcommands, describe_cluster
from panel.clusters.management.cluster_settings import SettingsSubcommands
from panel.clusters.management.cluster_vip import VipSubcommands
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import attach, reconciler
from panel.core import polling

RECENT_EVENTS = 10
# How long `cluster create` follows a cluster another node's agent provisions.
PROVISION_WAIT_SECONDS = 600


class Command(MemberSubcommands, SettingsSubcommands, RoleSubcommands, VipSubcommands, PanelCommand):
    help = "Create, inspect and manage PostgreSQL clusters in the foreground (no worker needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser)

        p = add("create", "Create a cluster and provision it now.", cluster=False, owner=True)
        p.add_argument("--name", required=True, help="cluster name (lowercase letters, digits, hyphens)")
        p.add_argument("--plan", required=True, metavar="SLUG", help="plan slug, e.g. db-s-1vcpu-1gb")
        p.add_argument("--version", dest="pg_version", metavar="V", help="PostgreSQL major version")
        p.add_argument(
            "--node", metavar="NODE", help="the node to create it on (default: most free capacity)"
        )
        p.add_argument(
            "--num-nodes",
            type=int,
            default=1,
            metavar="N",
            help="members: 1 (default), or 2-3 for a primary with standbys (plans of 2 GB or more)",
        )

        add("list", "List clusters.", cluster=False, owner=True)
        add("show", "Show a cluster's details and recent events.")
        add("start", "Start a stopped cluster.")
        add("stop", "Stop a cluster (its data stays).")
        add("restart", "Restart a cluster.")
        p = add("delete", "Stop a cluster and delete it with all its data.")
        p.add_argument("--yes", action="store_true", help="confirm the deletion")

        p = add("connection", "Print the connection details, password included.")
        p.add_argument("--user", help="database user (default: the admin user)")
        p.add_argument("--database", help="database (default: the default database)")
        p.add_argument("--format", dest="fmt", choices=FORMATS, default="uri")
        p.add_argument(
            "--standby", action="store_true", help="the read-only port, served by a standby (with standbys)"
        )
        p.add_argument("--private", action="store_true", help="the node's private address as the host")

        p = add(
            "attach",
            "Attach an existing server; the password comes from PGPASSWORD or a prompt.",
            cluster=False,
            owner=True,
        )
        p.add_argument("--name", required=True)
        p.add_argument("--host", required=True)
        p.add_argument("--port", required=True, type=int)
        p.add_argument("--user", required=True)
        p.add_argument("--database", required=True)
        p.add_argument("--sslmode", choices=SSLMODES, default="require")

        self.add_role_arguments(add)
        self.add_member_arguments(add)
        self.add_settings_arguments(add)
        self.add_vip_arguments(add)

        add(
            "reconcile",
            "Restart clusters whose server died; fail stuck jobs (one pass).",
            cluster=False,
        )

    # --- lookups -------------------------------------------------------------------------------

    def _owner(self, options: dict[str, Any]) -> User:
        """The --owner user, or else the first superuser (the account `make run` creates)."""
        if options.get("owner"):
            return find_user(options["owner"])
        owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if owner is None:
            raise CommandError(
                "No superuser exists to own the cluster: pass --owner USERNAME, "
                "or create the admin account with: manage.py ensureadmin"
            )
        return owner

    # --- clusters ------------------------------------------------------------------------------

    def do_create(self, options: dict[str, Any]) -> None:
        owner = self._owner(options)
        cluster = services.create_cluster(
            owner,
            name=options["name"],
            plan_slug=options["plan"],
            version=options["pg_version"],
            enqueue=False,
            node=options.get("node"),
            num_nodes=options["num_nodes"],
        )
        assert cluster.node is not None  # placed on a node
        self.stdout.write(
            f"Creating {cluster.name}: plan {cluster.plan_slug}, PostgreSQL {cluster.version}, "
            f"node {cluster.node.name}, port {cluster.port}, owner {owner.get_username()}."
        )
        last: list[str] = []

        def report(instance: Cluster) -> None:
            if instance.progress_message and instance.progress_message not in last:
                last.append(instance.progress_message)
                self.stdout.write(f"  [{instance.progress:3d}%] {instance.progress_message}")

        def saved(sender: type[Cluster], instance: Cluster, **kwargs: Any) -> None:
            if instance.pk == cluster.pk:
                report(instance)

        def provisioned() -> bool:
            cluster.refresh_from_db()
            report(cluster)
            return cluster.status != ClusterStatus.CREATING

        if cluster.node.is_here:
            uid = f"cluster-create-{cluster.pk}"
            post_save.connect(saved, sender=Cluster, dispatch_uid=uid, weak=False)
            try:
                cluster = services.provision_cluster(cluster.pk)
            finally:
                post_save.disconnect(sender=Cluster, dispatch_uid=uid)
        else:
            # Another node's agent provisions it: follow its row.
            services.queue_provisioning(cluster)
            assert cluster.node is not None
            self.stdout.write(f"  queued on node {cluster.node.name}'s agent")
            polling.wait_for(provisioned, PROVISION_WAIT_SECONDS, interval=0.5)
        if cluster.status != ClusterStatus.ONLINE:
            raise CommandError(
                f"Provisioning {cluster.name} failed: {cluster.error_message or cluster.get_status_display()}\n"
                f"Remove it with: manage.py cluster delete {cluster.name} --yes"
            )
        details = services.connection_details(cluster)
        self.stdout.write(self.style.SUCCESS(f"{cluster.name} is online on port {cluster.port}."))
        self.stdout.write(f"Connection: {details.shown(reveal=False).uri}")
        if cluster.standby_port:
            standby = services.connection_details(cluster, standby=True)
            self.stdout.write(f"Standby (read-only): {standby.shown(reveal=False).uri}")
        self.stdout.write(f"Show the password with: manage.py cluster connection {cluster.name}")

    def do_list(self, options: dict[str, Any]) -> None:
        qs = Cluster.objects.select_related("owner", "node").order_by("name", "created_at")
        if options.get("owner"):
            qs = qs.filter(owner=find_user(options["owner"]))
        rows = [
            (
                c.name,
                c.owner.get_username(),
                "unknown" if c.status_unknown else c.status,
                c.plan_slug or "-",
                c.version,
                c.node.name if c.node else "-",
                str(c.port or "-"),
                f"{c.created_at:%Y-%m-%d %H:%M}",
            )
            for c in qs
        ]
        if not rows:
            self.stdout.write("No clusters.")
            return
        print_table(
            self.stdout, ("NAME", "OWNER", "STATUS", "PLAN", "VERSION", "NODE", "PORT", "CREATED"), rows
        )

    def do_show(self, options: dict[str, Any]) -> None:
        c = find_cluster(options["name"], options.get("owner"))
        lines = describe_cluster(c)
        width = max(len(label) for label, _value in lines)
        for label, value in lines:
            self.stdout.write(f"{label + ':':<{width + 1}} {value}")
        events = list(c.events.all()[:RECENT_EVENTS])
        if events:
            self.stdout.write("\nRecent events:")
            for event in events:
                self.stdout.write(f"  {event.created_at:%Y-%m-%d %H:%M:%S} {event.level:<7} {event.message}")

    def _action(self, options: dict[str, Any], action: str, doing: str, done: str) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        self.stdout.write(f"{doing} {cluster.name}…")
        cluster = services.perform_action(cluster, action)
        self.stdout.write(self.style.SUCCESS(f"{cluster.name} {done}."))

    def do_start(self, options: dict[str, Any]) -> None:
        self._action(options, "start", "Starting", "is online")

    def do_stop(self, options: dict[str, Any]) -> None:
        self._action(options, "stop", "Stopping", "is stopped")

    def do_restart(self, options: dict[str, Any]) -> None:
        self._action(options, "restart", "Restarting", "is online")

    def do_delete(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        if not options["yes"]:
            raise CommandError(
                f"Deleting {cluster.name} stops it and removes all its data. Confirm with --yes: "
                f"manage.py cluster delete {cluster.name} --yes"
            )
        services.delete_cluster(cluster, confirm_name=cluster.name)
        self.stdout.write(self.style.SUCCESS(f"{cluster.name} deleted."))

    def do_connection(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        details = services.connection_details(
            cluster,
            user=options["user"],
            database=options["database"],
            standby=options["standby"],
            private=options["private"],
        )
        self.stdout.write(details.render(options["fmt"]))

    def do_attach(self, options: dict[str, Any]) -> None:
        owner = self._owner(options)
        try:
            validate_host(options["host"])  # before asking for a password
        except InvalidHost as exc:
            raise CommandError(f"--host: {exc}") from None
        password = os.environ.get("PGPASSWORD")
        if password is None:
            password = getpass.getpass(f"Password for {options['user']}@{options['host']}: ")
        server = attach.ExternalServer(
            host=options["host"],
            port=options["port"],
            user=options["user"],
            password=password,
            database=options["database"],
            sslmode=options["sslmode"],
        )
        # The operator at the command line may attach anything, as staff may on the web.
        cluster = attach.attach_cluster(owner, name=options["name"], server=server, operator=True)
        self.stdout.write(
            self.style.SUCCESS(
                f"Attached {cluster.name}: PostgreSQL {cluster.version} at {cluster.host}:{cluster.port}."
            )
        )

    def do_reconcile(self, options: dict[str, Any]) -> None:
        notes = reconciler.reconcile()
        for note in notes:
            self.stdout.write(note)
        if not notes:
            self.stdout.write("Every cluster is as it should be.")

    # --- output ----------------------------------------------------------------------------------
