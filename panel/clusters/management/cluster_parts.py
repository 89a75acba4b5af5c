"""Parts of ``manage.py cluster``: the role subcommands (user-add, user-delete, password-reset, db-add,
db-delete) as a mixin calling the same services (``panel.clusters.services.roles``) as the Users & Databases
tab, and what ``cluster show`` prints."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from panel.clusters.management.cli import PanelCommand, find_cluster
from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import roles
from panel.clusters.standbys.services import ha_health
from panel.core.errors import shown_text

SUBCOMMANDS = (
    ("user-add", "Add a database user with a generated password."),
    ("user-delete", "Delete a database user."),
    ("password-reset", "Give a database user a new generated password."),
    ("db-add", "Add a database."),
    ("db-delete", "Delete a database and everything in it."),
)


class RoleSubcommands(PanelCommand):
    def add_role_arguments(self, add: Callable[..., argparse.ArgumentParser]) -> None:
        for name, help_text in SUBCOMMANDS:
            p = add(name, help_text)
            p.add_argument("item", metavar="NAME", help="user or database name")
            if name.endswith("-delete"):
                p.add_argument("--yes", action="store_true", help="confirm the deletion")

    def _confirm(self, options: dict[str, Any], what: str) -> None:
        if not options["yes"]:
            raise CommandError(f"Deleting {what} cannot be undone. Confirm with --yes.")

    def do_user_add(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        user = roles.add_user(cluster, options["item"])
        self.stdout.write(self.style.SUCCESS(f"User {user.name} added to {cluster.name}."))
        self.stdout.write(
            f"Show its password with: manage.py cluster connection {cluster.name} --user {user.name}"
        )

    def do_user_delete(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        self._confirm(options, f"user {options['item']}")
        roles.delete_user(cluster, options["item"])
        self.stdout.write(self.style.SUCCESS(f"User {options['item']} deleted from {cluster.name}."))

    def do_password_reset(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        user = roles.reset_password(cluster, options["item"])
        self.stdout.write(self.style.SUCCESS(f"New password set for {user.name}."))
        self.stdout.write(f"Show it with: manage.py cluster connection {cluster.name} --user {user.name}")

    def do_db_add(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        database = roles.add_database(cluster, options["item"])
        self.stdout.write(self.style.SUCCESS(f"Database {database.name} added to {cluster.name}."))

    def do_db_delete(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        self._confirm(options, f"database {options['item']} and all its data")
        roles.delete_database(cluster, options["item"])
        self.stdout.write(self.style.SUCCESS(f"Database {options['item']} deleted from {cluster.name}."))


def describe_cluster(c: Cluster) -> list[tuple[str, str]]:
    """``cluster show``'s lines: label and value, in reading order."""
    plan = c.plan
    lines = [
        ("Name", c.name),
        ("ID", str(c.pk)),
        ("Owner", c.owner.get_username()),
        ("Kind", c.get_kind_display()),
        ("Status", c.get_status_display()),
    ]
    if c.status == ClusterStatus.CREATING:
        lines.append(("Progress", f"{c.progress}% {c.progress_message}".strip()))
    if why := ha_health.detail(c):
        lines.append(("Degraded", str(why)))
    if c.error_message:
        lines.append(("Error", shown_text(c.error_message)))
    if plan:
        lines.append(
            (
                "Plan",
                f"{plan.slug} ({plan.vcpus} vCPU, {plan.ram_gb} GB RAM, {plan.disk_gb} GB disk; "
                f"max_connections {plan.max_connections}, {plan.pool_connections} for pools)",
            )
        )
    lines += [
        ("PostgreSQL", c.version),
        ("Host", f"{c.host}:{c.port}"),
    ]
    if c.pooler_port:
        lines.append(("Pooler port", str(c.pooler_port)))
    lines += [
        ("Admin user", c.admin_user),
        ("Users", ", ".join(c.users.values_list("name", flat=True)) or "-"),
        ("Databases", ", ".join(c.databases.values_list("name", flat=True)) or "-"),
        ("Created", f"{c.created_at:%Y-%m-%d %H:%M:%S %Z}"),
        ("Online since", f"{c.online_since:%Y-%m-%d %H:%M:%S %Z}" if c.online_since else "-"),
    ]
    if c.is_local:
        lines.append(("Data directory", str(c.data_root)))
    return lines
