"""A new cluster as the managed service's create call asks for it: its tags, its trusted sources
(``rules``) and its storage (``storage_size_mib``) checked before anything is made, recorded with
the cluster's row before its provisioning is queued, so the server starts with them."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from panel.clusters.face import services as cluster_services
from panel.clusters.lib import firewall
from panel.clusters.lib.plans import PLANS_BY_SLUG
from panel.clusters.models import Cluster, TrustedSource
from panel.core.errors import N_, ServiceError
from panel.managed.services.tags import check_tags, set_tags

MIB_PER_GIB = 1024


def storage_mib(plan_slug: str) -> int | None:
    """The disk that comes with a plan, in MiB (what ``storage_size_mib`` reports)."""
    plan = PLANS_BY_SLUG.get(plan_slug)
    return plan.disk_gb * MIB_PER_GIB if plan else None


def check_storage(plan_slug: str, storage_size_mib: int | None) -> None:
    """Storage comes with the plan here (the plan's disk is what the storage limits and autoscale
    measure against): a size other than the plan's is refused, naming the plan that has it."""
    own = storage_mib(plan_slug)
    if storage_size_mib is None or own is None or storage_size_mib == own:
        return
    fitting = [p.slug for p in PLANS_BY_SLUG.values() if p.disk_gb * MIB_PER_GIB == storage_size_mib]
    params = {"plan": plan_slug, "own": own, "mib": storage_size_mib, "fit": fitting[0] if fitting else ""}
    if fitting:
        template = N_(
            "Storage comes with the plan here: %(plan)s has %(own)d MiB; the size %(fit)s has %(mib)d MiB."
        )
    else:
        template = N_("Storage comes with the plan here: %(plan)s has %(own)d MiB; no plan has %(mib)d MiB.")
    raise ServiceError(template, field="storage_size_mib", code="database.storage_not_offered", params=params)


def check_sources(values: list[str]) -> list[str]:
    try:
        return firewall.normalize(values)
    except firewall.InvalidSource as exc:
        raise ServiceError.of(exc, "rules") from None


def create_managed(
    owner: Any,
    *,
    name: str,
    plan_slug: str,
    version: str | None,
    node: str | None,
    tags: list[str],
    sources: list[str],
    storage_size_mib: int | None,
    num_nodes: int = 1,
) -> Cluster:
    """Everything checked first, then the cluster's row, its tags and trusted sources in one go,
    and only then its provisioning queued (which writes pg_hba.conf from the sources)."""
    wanted_tags = check_tags(tags)
    wanted_sources = check_sources(sources)
    check_storage(plan_slug, storage_size_mib)
    with transaction.atomic():
        cluster = cluster_services.create_cluster(
            owner,
            name=name,
            plan_slug=plan_slug,
            version=version,
            node=node,
            enqueue=False,
            num_nodes=num_nodes,
        )
        set_tags(cluster, wanted_tags)
        TrustedSource.objects.bulk_create([TrustedSource(cluster=cluster, value=v) for v in wanted_sources])
    cluster_services.queue_provisioning(cluster)
    return cluster
