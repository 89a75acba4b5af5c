"""The addresses and networks allowed to reach a cluster over TCP."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from panel.clusters.models.clusters import Cluster


class TrustedSource(models.Model):
    """An IP address or network allowed to connect to a cluster over TCP, to its server and its
    pooler alike (lib.firewall). A cluster with none accepts every address."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="trusted_sources")
    # As lib.firewall.display writes it: an address without /32 or /128, else a network in CIDR.
    value = models.CharField(_("address or network"), max_length=43)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "value")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "value"), name="trusted_source_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return self.value


def trusted_source_values(cluster: Cluster) -> list[str]:
    """A cluster's trusted sources as pg_hba.conf and PgBouncer's hba file are written from them."""
    return list(
        TrustedSource.objects.filter(cluster=cluster)
        .order_by("created_at", "value")
        .values_list("value", flat=True)
    )
