"""A cluster's tags (the cluster object's ``tags``, the list's ``tag_name`` filter)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from panel.clusters.models import Cluster
from panel.core.errors import N_, ServiceError
from panel.managed.lib.tags import MAX_TAGS, bad_tags
from panel.managed.models import ClusterTag


def check_tags(names: list[str]) -> list[str]:
    """The tags, each once in the order given, or the refusal naming the ones that are not tags."""
    bad = bad_tags(names)
    if bad:
        raise ServiceError(
            N_("Not a tag: %(tags)s. A tag has 1 to 255 letters, digits, ':', '-', '_' or '.'."),
            field="tags",
            code="tag.invalid",
            params={"tags": ", ".join(repr(name) for name in bad)},
        )
    unique = list(dict.fromkeys(names))
    if len(unique) > MAX_TAGS:
        raise ServiceError(
            N_("A cluster has at most %(max)d tags."),
            field="tags",
            code="tag.too_many",
            params={"max": MAX_TAGS},
        )
    return unique


def set_tags(cluster: Cluster, names: list[str]) -> list[str]:
    """Replace the cluster's tags."""
    wanted = check_tags(names)
    with transaction.atomic():
        ClusterTag.objects.filter(cluster=cluster).exclude(name__in=wanted).delete()
        have = set(ClusterTag.objects.filter(cluster=cluster).values_list("name", flat=True))
        ClusterTag.objects.bulk_create([ClusterTag(cluster=cluster, name=n) for n in wanted if n not in have])
    return wanted


def tags_of(cluster: Cluster) -> list[str]:
    return sorted(tag.name for tag in cluster.tags.all())  # a list's prefetch serves it


def tagged(clusters: QuerySet[Cluster], tag_name: str) -> QuerySet[Cluster]:
    """The clusters that carry ``tag_name`` (exactly, as the managed service matches it)."""
    return clusters.filter(tags__name=tag_name)
