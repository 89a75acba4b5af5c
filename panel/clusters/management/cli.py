"""What the `manage.py` commands of every app share: a base command that refuses to run on a
database that is not set up, finding a cluster by name, printing a table."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.template.defaultfilters import filesizeformat

from panel.clusters.models import Cluster
from panel.core.errors import ServiceError


class PanelCommand(BaseCommand):
    """A panel command (cluster, pool, bench, insights): on a fresh checkout, or after an upgrade
    that brought migrations, it says to set the database up first instead of failing with a
    "no such table" traceback half-way through."""

    #: How a service error's field is named on the command line (``{"size": "--size"}``);
    #: a field not listed is shown as it is.
    field_labels: dict[str, str] = {}

    def needs_database(self, options: dict[str, Any]) -> bool:
        """Whether this invocation reads the panel's database (a subcommand may not)."""
        return True

    def execute(self, *args: Any, **options: Any) -> str | None:
        if self.needs_database(options):
            ensure_database_ready()
        return super().execute(*args, **options)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run ``do_<subcommand>`` (dashes as underscores); a service's refusal becomes a message
        and exit status 1, naming the option it is about, never a traceback."""
        handler: Callable[[dict[str, Any]], None] = getattr(
            self, "do_" + options["subcommand"].replace("-", "_")
        )
        try:
            handler(options)
        except ServiceError as exc:
            where = f" ({self.field_labels.get(exc.field, exc.field)})" if exc.field else ""
            raise CommandError(f"{exc.message}{where}") from None


class AddSubcommand(Protocol):
    """What :func:`cluster_subcommands` returns."""

    def __call__(
        self, name: str, help_text: str, *, cluster: bool = True, owner: bool | None = None
    ) -> argparse.ArgumentParser: ...


def cluster_subcommands(
    parser: CommandParser, cluster_dest: str = "name", cluster_help: str = "cluster name"
) -> AddSubcommand:
    """``add(name, help_text)``: a subcommand of ``parser`` about one cluster, named by CLUSTER
    (stored as ``cluster_dest``) and --owner; it returns the subcommand's parser for its own
    arguments. ``cluster=False``: a subcommand about no one cluster, with --owner only when
    ``owner=True`` (the owner of what it makes, or whose clusters it lists)."""
    sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    def add(
        name: str, help_text: str, *, cluster: bool = True, owner: bool | None = None
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if cluster:
            p.add_argument(cluster_dest, metavar="CLUSTER", help=cluster_help)
        if cluster if owner is None else owner:
            p.add_argument("--owner", metavar="USERNAME", help="the cluster owner's username")
        return p

    return add


def ensure_database_ready(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Raise CommandError (a message and exit 1, no traceback) unless every migration is applied."""
    connection = connections[alias]
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        raise CommandError(f"Cannot read the panel's database ({connection.vendor}): {exc}") from None
    if pending:
        raise CommandError(
            f"The panel's database is not set up ({len(pending)} migrations not applied). Run `make run` "
            "(which prepares it and starts the panel) or `.venv/bin/python manage.py migrate` first."
        )


def find_user(username: str) -> User:
    try:
        return get_user_model().objects.get(username=username)
    except get_user_model().DoesNotExist:
        raise CommandError(f"No user named {username!r}.") from None


def find_cluster(name: str, owner: str | None = None) -> Cluster:
    """The cluster named ``name`` (of ``owner`` when given); a name two users share needs ``owner``."""
    clusters = Cluster.objects.filter(name=name).select_related("owner")
    if owner:
        clusters = clusters.filter(owner=find_user(owner))
    found = list(clusters[:10])
    if not found:
        whose = f" owned by {owner!r}" if owner else ""
        raise CommandError(f"No cluster named {name!r}{whose}.")
    if len(found) > 1:
        owners = ", ".join(sorted(c.owner.get_username() for c in found))
        raise CommandError(
            f"Several users have a cluster named {name!r} ({owners}); choose one with --owner USERNAME."
        )
    return found[0]


def human_size(value: int) -> str:
    """The templates' filesizeformat, with a plain space: a terminal is not HTML."""
    return str(filesizeformat(value)).replace("\xa0", " ")


def print_table(out: OutputWrapper, header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell, the header first."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
