"""The quota report: repquota's columns per database and per role, as text (``repquota -s``
layout, for the command line) and as CSV (bytes and counts, for a spreadsheet)."""

from __future__ import annotations

import csv
import io

from django.utils import timezone

from panel.clusters.models import Cluster
from panel.quotas.lib.quota import ReportRow, flags, grace_column, render_report
from panel.quotas.models import Quota, QuotaKind, Storage
from panel.quotas.services.cycle import storage_of

CSV_HEADER = (
    "kind",
    "name",
    "flags",
    "space_used_bytes",
    "space_soft_bytes",
    "space_hard_bytes",
    "space_grace",
    "relations_used",
    "relations_soft",
    "relations_hard",
    "relations_grace",
    "state",
    "measured_at",
)


def _row(quota: Quota) -> ReportRow:
    return ReportRow(
        quota.name, quota.space, quota.files, quota.over_since.timestamp() if quota.over_since else None
    )


def grace_columns(quota: Quota, storage: Storage, now: float) -> tuple[str, str]:
    row = _row(quota)
    return (
        grace_column(row.space, row.over_since, storage.space_grace_seconds, now),
        grace_column(row.files, row.over_since, storage.files_grace_seconds, now),
    )


def report_text(cluster: Cluster, *, human: bool = True) -> str:
    """Both reports, databases then roles, as ``repquota -s`` prints them."""
    storage = storage_of(cluster)
    now = timezone.now().timestamp()
    parts = []
    for kind in (QuotaKind.DATABASE, QuotaKind.ROLE):
        rows = [_row(q) for q in cluster.quotas.filter(kind=kind).order_by("name")]
        parts.append(
            render_report(
                rows,
                title=cluster.name,
                kind=str(kind.value),
                space_grace=storage.space_grace_seconds,
                files_grace=storage.files_grace_seconds,
                now=now,
                human=human,
            )
        )
    return "\n".join(parts)


def report_csv(cluster: Cluster) -> str:
    storage = storage_of(cluster)
    now = timezone.now().timestamp()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for quota in cluster.quotas.order_by("kind", "name"):
        space_grace, files_grace = grace_columns(quota, storage, now)
        writer.writerow(
            (
                quota.kind,
                quota.name,
                flags(quota.space, quota.files),
                quota.space_used if quota.space_used is not None else "",
                quota.space_soft,
                quota.space_hard,
                space_grace,
                quota.files_used if quota.files_used is not None else "",
                quota.files_soft,
                quota.files_hard,
                files_grace,
                quota.state,
                quota.measured_at.isoformat() if quota.measured_at else "",
            )
        )
    return out.getvalue()
