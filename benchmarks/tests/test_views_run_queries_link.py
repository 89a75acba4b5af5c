"""A finished run's page links to the Queries tab over the run's window (from its start to the
first collection after its end), and that window holds what the run's statements did."""

from __future__ import annotations

import datetime as dt
import html
import re
from urllib.parse import parse_qs, urlsplit

from django.test import Client
from django.urls import reverse
from django.utils import timezone

from benchmarks.tests.test_views_pages import make_run
from panel.clusters.models import Cluster
from panel.insights.models import StatementDelta, StatementText


def test_a_finished_runs_page_links_to_the_queries_it_caused(
    owner_client: Client, cluster_row: Cluster
) -> None:
    now = timezone.now()
    run = make_run(
        cluster_row, started_at=now - dt.timedelta(minutes=3), finished_at=now - dt.timedelta(minutes=2)
    )
    StatementText.objects.create(
        cluster=cluster_row, queryid=7, text="UPDATE pgbench_accounts SET abalance = $1"
    )
    StatementText.objects.create(cluster=cluster_row, queryid=8, text="SELECT before_the_run()")
    common = {
        "database": "defaultdb",
        "role": "doadmin",
        "sq_ms": 1.0,
        "rows": 1,
        "blks_hit": 1,
        "blks_read": 0,
    }
    # Stored by the collections during the run and the first one after it; another one before.
    for ago, queryid in ((150, 7), (115, 7), (200, 8)):
        StatementDelta.objects.create(
            cluster=cluster_row,
            ts=now - dt.timedelta(seconds=ago),
            queryid=queryid,
            calls=10,
            total_ms=5.0,
            **common,
        )

    page = owner_client.get(reverse("benchmarks:run-detail", args=[cluster_row.pk, run.pk])).content.decode()
    link = re.search(r'<a class="btn btn-sm btn-outline-secondary bench-queries" href="([^"]+)"', page)
    assert link, "no link to the run's queries"
    url = html.unescape(link.group(1))
    assert urlsplit(url).path == reverse("insights:queries", args=[cluster_row.pk])
    params = parse_qs(urlsplit(url).query)
    assert dt.datetime.fromisoformat(params["start"][0]) == run.started_at

    tab = owner_client.get(url).content.decode()
    assert "UPDATE pgbench_accounts" in tab and "before_the_run" not in tab
    assert '<td class="text-end" data-figure="calls">20</td>' in tab


def test_a_run_that_never_started_has_no_queries_link(owner_client: Client, cluster_row: Cluster) -> None:
    run = make_run(cluster_row, started_at=None, finished_at=None, status="failed")
    page = owner_client.get(reverse("benchmarks:run-detail", args=[cluster_row.pk, run.pk])).content.decode()
    assert "bench-queries" not in page
