"""What the `manage.py` commands of every app share: finding a cluster by name, printing a table."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.management.base import CommandError, OutputWrapper

from panel.clusters.models import Cluster


def find_user(username: str) -> AbstractBaseUser:
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


def print_table(out: OutputWrapper, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Columns padded to their widest cell, the header first."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
