"""The quota report: repquota's columns per database and per role, as text (``repquota -s``
layout, for the command line) and as CSV (bytes and counts, for a spreadsheet)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

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
    """The grace left of each dimension at ``now`` (a Unix time), as repquota shows it."""
    row = _row(quota)
    return (
        grace_column(row.space, row.over_since, storage.space_grace_seconds, now),
        grace_column(row.files, row.over_since, storage.files_grace_seconds, now),
    )


@dataclass(frozen=True)
class Row:
    """One quota as the report shows it wherever it is shown (the tab, the CSV, the API): its
    flags and the grace left of each dimension."""

    quota: Quota
    flags: str
    space_grace: str
    files_grace: str


def row_of(quota: Quota, storage: Storage | None = None, now: float | None = None) -> Row:
    """One quota's row (its cluster's grace periods, the time ``now`` or the clock's)."""
    storage = storage or storage_of(quota.cluster)
    at = timezone.now().timestamp() if now is None else now
    return Row(quota, flags(quota.space, quota.files), *grace_columns(quota, storage, at))


def rows(cluster: Cluster, kind: str | None = None, *, storage: Storage | None = None) -> list[Row]:
    """The cluster's quotas (of one ``kind``, or all: databases, then roles), by name."""
    storage = storage or storage_of(cluster)
    now = timezone.now().timestamp()
    quotas = cluster.quotas.order_by("kind", "name")
    if kind is not None:
        quotas = quotas.filter(kind=kind)
    return [row_of(quota, storage, now) for quota in quotas]


def report_text(cluster: Cluster, *, human: bool = True) -> str:
    """Both reports, databases then roles, as ``repquota -s`` prints them."""
    storage = storage_of(cluster)
    now = timezone.now().timestamp()
    parts = []
    for kind in (QuotaKind.DATABASE, QuotaKind.ROLE):
        parts.append(
            render_report(
                [_row(q) for q in cluster.quotas.filter(kind=kind).order_by("name")],
                title=cluster.name,
                kind=str(kind.value),
                space_grace=storage.space_grace_seconds,
                files_grace=storage.files_grace_seconds,
                now=now,
                human=human,
            )
        )
    return "\n".join(parts)


def _blank_if_none(value: object) -> object:
    return "" if value is None else value


def report_csv(cluster: Cluster) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for row in rows(cluster):
        quota = row.quota
        writer.writerow(
            (
                quota.kind,
                quota.name,
                row.flags,
                _blank_if_none(quota.space_used),
                quota.space_soft,
                quota.space_hard,
                row.space_grace,
                _blank_if_none(quota.files_used),
                quota.files_soft,
                quota.files_hard,
                row.files_grace,
                quota.state,
                quota.measured_at.isoformat() if quota.measured_at else "",
            )
        )
    return out.getvalue()
