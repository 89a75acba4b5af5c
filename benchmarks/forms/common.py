"""What the Benchmarks tab's forms share: the choices of target, database, engine and script."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
from benchmarks.lib import sysbench_command as sb
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

DIRECT = "direct"
CUSTOM = "custom"
SCRIPT_CHOICES = [
    ("tpcb-like", _("TPC-B-like (read/write, the default)")),
    ("simple-update", _("Simple update")),
    ("select-only", _("Select only")),
]
SYSBENCH_SCRIPT_CHOICES = [
    ("oltp_read_write", _("OLTP read/write")),
    ("oltp_read_only", _("OLTP read only")),
    ("oltp_point_select", _("OLTP point select")),
    ("oltp_write_only", _("OLTP write only")),
]
# One choice per engine (benchmarks/lib/engines.py): a new engine shows up here by itself.
ENGINE_CHOICES = [(name, name) for name in engines.ENGINES]
QUERY_MODE_CHOICES = [
    ("simple", _("Simple")),
    ("extended", _("Extended")),
    ("prepared", _("Prepared")),
]
MAX_SWEEP_POINTS = 20


def target_choices(cluster: Cluster) -> list[tuple[str, str]]:
    choices = [(DIRECT, str(_("The cluster directly")))]
    choices += [
        (str(pool.pk), str(_("Pool %(name)s (%(mode)s, %(size)s)")) % {
            "name": pool.name, "mode": pool.mode, "size": pool.size,
        })
        for pool in cluster.pools.all()
    ]  # fmt: skip
    return choices


def database_choices(field: forms.Field, cluster: Cluster, fallback: str | None) -> None:
    """The cluster's databases; ``benchmark`` (the tutorial's) preselected when it exists."""
    names = [database.name for database in cluster.databases.all()]
    field.choices = [(name, name) for name in names]
    field.initial = "benchmark" if "benchmark" in names else fallback


def engine_name(value: str | None) -> str:
    return value or sb.PGBENCH  # forms posted before the engine existed: pgbench


class TargetMixin:
    cluster: Cluster
    fields: dict[str, forms.Field]

    def _pool_for(self, value: str) -> ConnectionPool | None:
        if value == DIRECT:
            return None
        pool = self.cluster.pools.filter(pk=value).first()
        if pool is None:
            raise forms.ValidationError(_("This pool no longer exists."), code="gone")
        return pool
