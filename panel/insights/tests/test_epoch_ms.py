"""``EpochMs``: the database computes chart times; both dialects agree with Python to the millisecond."""

from __future__ import annotations

import datetime as dt

import pytest

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.insights.models import POSTGRESQL_EPOCH_MS, EpochMs, MetricPoint

TIMES = [
    dt.datetime(2026, 11, 22, 16, 0, 1, 234567, tzinfo=dt.UTC),  # rounds up to .235
    dt.datetime(2026, 11, 22, 16, 0, 1, 234499, tzinfo=dt.UTC),  # rounds down to .234
    dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
]


def expected(at: dt.datetime) -> int:
    return round(at.timestamp() * 1000)


@pytest.mark.django_db
def test_on_the_panels_own_metadata_database(cluster_row: Cluster) -> None:
    """SQLite's form under make test, PostgreSQL's under make test-pg."""
    MetricPoint.objects.bulk_create(
        [MetricPoint(cluster=cluster_row, metric="up", ts=at, value=1) for at in TIMES]
    )
    got = MetricPoint.objects.annotate(at_ms=EpochMs("ts")).order_by("ts").values_list("ts", "at_ms")
    assert [(at, expected(at)) for at in sorted(TIMES)] == list(got)


def test_on_postgresql(local_cluster: Cluster) -> None:
    """The PostgreSQL form, for a panel whose DATABASE_URL is PostgreSQL (run on a real server)."""
    sql = "SELECT " + POSTGRESQL_EPOCH_MS % {"expressions": "%s::timestamptz"}
    with dbconn.admin_connection(local_cluster) as conn:
        got = [conn.execute(sql, (at,)).fetchone()[0] for at in TIMES]  # type: ignore[index]
    assert got == [expected(at) for at in TIMES]
