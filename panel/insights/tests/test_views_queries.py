"""The Queries tab, a statement's page and its chart data: the owner's statements over a window,
sorted, swapped by HTMX; "restart to enable"; 404s to outsiders; the reset's confirmation."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.models import StatementDelta, StatementsState, StatementsStatus, StatementText

SLOW, BUSY, OLD = 111, -222, 333


def url(name: str, cluster: Cluster, *args: object) -> str:
    return reverse(f"insights:{name}", args=[cluster.pk, *args])


def delta(
    cluster: Cluster, queryid: int, ago: dt.timedelta, calls: int, total: float, **extra: object
) -> None:
    fields = {
        "database": "defaultdb",
        "role": "doadmin",
        "sq_ms": total * total / max(calls, 1),
        "rows": calls,
        "blks_hit": 90,
        "blks_read": 10,
        **extra,
    }
    StatementDelta.objects.create(
        cluster=cluster, ts=timezone.now() - ago, queryid=queryid, calls=calls, total_ms=total, **fields
    )


@pytest.fixture
def with_statements(cluster_row: Cluster) -> Cluster:
    """A slow statement and a busy one in the last minutes; an old one two hours ago."""
    StatementsState.objects.create(
        cluster=cluster_row, status=StatementsStatus.COLLECTING, checked_at=timezone.now()
    )
    for queryid, text in (
        (SLOW, "SELECT pg_sleep($1)"),
        (BUSY, "SELECT abalance FROM pgbench_accounts WHERE aid = $1"),
        (OLD, "UPDATE old_table SET x = $1"),
    ):
        StatementText.objects.create(cluster=cluster_row, queryid=queryid, text=text)
    minute = dt.timedelta(minutes=1)
    delta(cluster_row, SLOW, 2 * minute, 2, 900.0)
    delta(cluster_row, SLOW, minute, 1, 450.0)
    delta(cluster_row, BUSY, 2 * minute, 5000, 300.0)
    delta(cluster_row, BUSY, minute, 4000, 250.0)
    delta(cluster_row, OLD, dt.timedelta(hours=2), 7, 9999.0)
    return cluster_row


def listed(html: str) -> list[int]:
    order = []
    for queryid in (SLOW, BUSY, OLD):
        at = html.find(f'data-queryid="{queryid}"')
        if at >= 0:
            order.append((at, queryid))
    return [queryid for _at, queryid in sorted(order)]


def test_the_tab_lists_the_windows_statements_by_total_time(
    owner_client: Client, with_statements: Cluster
) -> None:
    response = owner_client.get(url("queries", with_statements))
    assert response.status_code == 200
    html = response.content.decode()
    assert listed(html) == [SLOW, BUSY]  # the old one is outside the hour
    assert "9,000" in html and "1,350.0 ms" in html  # digits grouped, as on every other tab
    assert 'aria-current="page' in html and url("queries", with_statements) in html


def test_the_tab_writes_its_figures_as_german_pages_do(
    owner_client: Client, with_statements: Cluster
) -> None:
    html = owner_client.get(url("queries", with_statements), HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert '<td class="text-end" data-figure="calls">9.000</td>' in html
    assert "1.350,0 ms" in html and "1350,0" not in html


def test_statistics_that_could_not_be_read_are_a_sentence_without_the_servers_words(
    owner_client: Client, cluster_row: Cluster
) -> None:
    socket = "/var/lib/pgpanel/clusters/x/run/.s.PGSQL.26001"
    StatementsState.objects.create(
        cluster=cluster_row,
        status=StatementsStatus.UNAVAILABLE,
        message=f'connection to server on socket "{socket}" failed: FATAL:  the database system is starting up',
        checked_at=timezone.now(),
    )
    html = owner_client.get(url("queries", cluster_row)).content.decode()
    assert "Query statistics could not be read." in html and "the next collection tries again" in html
    assert socket not in html and "FATAL" not in html


def test_a_longer_window_holds_the_older_statement(owner_client: Client, with_statements: Cluster) -> None:
    html = owner_client.get(url("queries", with_statements), {"window": "6h"}).content.decode()
    assert listed(html) == [OLD, SLOW, BUSY]


def test_sorting_by_calls_swaps_only_the_table_under_htmx(
    owner_client: Client, with_statements: Cluster
) -> None:
    response = owner_client.get(
        url("queries", with_statements), {"window": "1h", "by": "calls"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert listed(html) == [BUSY, SLOW]
    assert (
        'id="queries-body"' in html
        and 'class="nav nav-tabs cluster-tabs"' not in html
        and 'id="reset-queries-modal"' not in html
    )


def test_a_window_given_by_its_ends_is_a_runs_window(owner_client: Client, with_statements: Cluster) -> None:
    now = timezone.now()
    start, end = now - dt.timedelta(seconds=90), now
    html = owner_client.get(
        url("queries", with_statements), {"start": start.isoformat(), "end": end.isoformat()}
    ).content.decode()
    assert listed(html) == [SLOW, BUSY]
    assert "450.0 ms" in html and "4,000" in html  # the last minute's deltas only
    bad = owner_client.get(
        url("queries", with_statements), {"start": "yesterday", "end": "x"}
    ).content.decode()
    assert "could not be read" in bad


def test_an_empty_window_says_what_to_do(owner_client: Client, cluster_row: Cluster) -> None:
    html = owner_client.get(url("queries", cluster_row)).content.decode()
    assert "No statements in this window" in html
    assert reverse("benchmarks:tab", args=[cluster_row.pk]) in html


def test_a_cluster_started_before_the_library_asks_for_a_restart(
    owner_client: Client, cluster_row: Cluster
) -> None:
    StatementsState.objects.create(
        cluster=cluster_row, status=StatementsStatus.NOT_LOADED, message="not loaded"
    )
    html = owner_client.get(url("queries", cluster_row)).content.decode()
    assert "Restart to enable query statistics." in html
    assert reverse("clusters:action", args=[cluster_row.pk, "restart"]) in html


def test_a_statements_page_shows_its_full_text_and_its_chart_data(
    owner_client: Client, with_statements: Cluster
) -> None:
    html = owner_client.get(url("query-detail", with_statements, BUSY)).content.decode()
    assert "SELECT abalance FROM pgbench_accounts WHERE aid = $1" in html
    assert 'data-copy-target="#query-text"' in html and "data-query-chart" in html
    body = owner_client.get(url("query-data", with_statements, BUSY), {"window": "1h"}).json()
    assert [p["calls"] for p in body["points"]] == [5000, 4000]
    assert body["points"][0]["mean_ms"] == pytest.approx(0.06)
    assert owner_client.get(url("query-detail", with_statements, 999)).status_code == 404
    assert owner_client.get(url("query-detail", with_statements, "x" * 5)).status_code == 404


def test_outsiders_get_404_everywhere(other_client: Client, with_statements: Cluster) -> None:
    for response in (
        other_client.get(url("queries", with_statements)),
        other_client.get(url("query-detail", with_statements, SLOW)),
        other_client.get(url("query-data", with_statements, SLOW)),
        other_client.post(url("queries-reset", with_statements), {"confirm": "reset"}),
    ):
        assert response.status_code == 404
    assert StatementsState.objects.get(cluster=with_statements).reset_at is None


def test_a_reset_without_its_confirmation_changes_nothing(
    owner_client: Client, with_statements: Cluster
) -> None:
    response = owner_client.post(url("queries-reset", with_statements), follow=True)
    assert "Confirm the reset" in response.content.decode()
    assert StatementsState.objects.get(cluster=with_statements).reset_at is None
    assert owner_client.get(url("queries-reset", with_statements)).status_code == 405
