"""The Queries tab's data on a real cluster: pgbench's statements with the call counts pgbench
reported, the panel's own statements left out, a reset through the panel, and what the tenant's
doadmin can and cannot do with pg_stat_statements."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from io import StringIO

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from panel.clusters import services as cluster_services
from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.insights import services
from panel.insights.models import StatementsState, StatementsStatus
from panel.insights.services import queries
from tests.fixtures.clusters import module_cluster

pytestmark = pytest.mark.integration

PGBENCH = shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
PGBENCH_STATEMENTS = (
    "UPDATE pgbench_accounts",
    "SELECT abalance",
    "UPDATE pgbench_tellers",
    "UPDATE pgbench_branches",
    "INSERT INTO pgbench_history",
)


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    with module_cluster(django_db_blocker, "queries-owner", "queries-db") as made:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            pgbench(made, ["-i", "-s", "1", "-q"])
        yield made


def pgbench(cluster: Cluster, args: list[str]) -> str:
    details = cluster_services.connection_details(cluster)
    env = dict(os.environ, PGPASSWORD=details.password, PGSSLMODE="require", PGCONNECT_TIMEOUT="10")
    command = [PGBENCH, "-h", "127.0.0.1", "-p", str(cluster.port), "-U", details.user, *args, "defaultdb"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def processed(output: str) -> int:
    found = re.search(r"number of transactions actually processed: (\d+)", output)
    assert found, output
    return int(found.group(1))


def as_doadmin(cluster: Cluster, dbname: str = "defaultdb") -> psycopg.Connection:
    details = cluster_services.connection_details(cluster)  # the password; dbname as asked
    return psycopg.connect(
        host=details.host,
        port=details.port,
        user=details.user,
        password=details.password,
        dbname=dbname,
        sslmode="require",
        autocommit=True,
        connect_timeout=5,
    )


def top(cluster: Cluster) -> list[queries.Row]:
    return queries.top_statements(cluster, queries.window_of("1h"), limit=20)


def pgbench_rows(rows: list[queries.Row]) -> dict[str, queries.Row]:
    return {prefix: row for row in rows for prefix in PGBENCH_STATEMENTS if row.text.startswith(prefix)}


@pytest.mark.django_db
def test_a_pgbench_run_is_at_the_top_with_the_calls_pgbench_reported(cluster: Cluster) -> None:
    services.collect_cluster(cluster)  # the baseline: what ran before is not this run's
    output = pgbench(cluster, ["-n", "-c", "2", "-j", "1", "-t", "150"])
    transactions = processed(output)
    assert transactions == 300
    services.collect_cluster(cluster)

    rows = top(cluster)
    found = pgbench_rows(rows)
    assert set(found) == set(PGBENCH_STATEMENTS), [r.text for r in rows]
    for prefix, row in found.items():
        assert row.totals.calls == transactions, (prefix, row.totals)
        assert row.totals.database == "defaultdb" and row.totals.role == "doadmin"
    # The five statements of the run took the most time of the window.
    assert {r.text.split(" ")[0] for r in rows[:5]} <= {"UPDATE", "SELECT", "INSERT"}
    assert all(r.text for r in rows[:5]) and rows[0].totals.total_ms >= rows[-1].totals.total_ms
    accounts = found["UPDATE pgbench_accounts"].totals
    assert accounts.rows == transactions and accounts.mean_ms > 0

    # A second run counts only its own calls in a window that starts after the first one.
    state = StatementsState.objects.get(cluster=cluster)
    assert state.status == StatementsStatus.COLLECTING
    since = state.checked_at
    output = pgbench(cluster, ["-n", "-S", "-c", "2", "-j", "1", "-t", "100"])
    services.collect_cluster(cluster)
    window = queries.Window(since, state.checked_at.replace(year=state.checked_at.year + 1))
    rows = queries.top_statements(cluster, window)
    select = [r for r in rows if r.text.startswith("SELECT abalance")]
    assert len(select) == 1 and select[0].totals.calls == processed(output) == 200
    assert not [r for r in rows if r.text.startswith("UPDATE pgbench_accounts")]


@pytest.mark.django_db
def test_the_panels_own_statements_are_not_listed(cluster: Cluster) -> None:
    services.collect_cluster(cluster)
    pgbench(cluster, ["-n", "-S", "-c", "1", "-t", "20"])
    services.collect_cluster(cluster)  # the monitor role's own statements run once more
    services.collect_cluster(cluster)
    panel_roles = [settings.PANEL_SUPERUSER, settings.PANEL_MONITOR_ROLE]
    with dbconn.admin_connection(cluster) as conn:
        recorded = conn.execute(
            "SELECT count(*) FROM public.pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
            "WHERE r.rolname = ANY(%s)",
            [panel_roles],
        ).fetchone()
    assert recorded is not None and recorded[0] > 0, "the panel's statements were never recorded"
    rows = queries.top_statements(cluster, queries.window_of("24h"), limit=1000)
    assert rows, "nothing listed at all"
    assert not [r for r in rows if r.totals.role in panel_roles]
    assert not [r for r in rows if "pg_stat_database" in r.text or "pg_stat_statements" in r.text]


@pytest.mark.django_db
def test_a_reset_clears_the_servers_counters_and_windows_stay_right(cluster: Cluster) -> None:
    services.collect_cluster(cluster)
    first = processed(pgbench(cluster, ["-n", "-S", "-c", "1", "-t", "120"]))
    state = queries.reset_statements(cluster)  # collects what ran first
    assert state.reset_at is not None
    with dbconn.admin_connection(cluster) as conn:
        left = conn.execute(
            "SELECT count(*) FROM public.pg_stat_statements WHERE query LIKE 'SELECT abalance%%'"
        ).fetchone()
    assert left == (0,)
    second = processed(pgbench(cluster, ["-n", "-S", "-c", "1", "-t", "70"]))
    services.collect_cluster(cluster)
    window = queries.Window(state.reset_at, state.reset_at.replace(year=state.reset_at.year + 1))
    select = [r for r in queries.top_statements(cluster, window) if r.text.startswith("SELECT abalance")]
    assert [r.totals.calls for r in select] == [second]
    # The hour holds both runs, the one before the reset and the one after, each counted once.
    hour = [r for r in top(cluster) if r.text.startswith("SELECT abalance")]
    assert sum(r.totals.calls for r in hour) >= first + second


@pytest.mark.django_db
def test_doadmin_reads_its_own_statements_and_nothing_more(cluster: Cluster) -> None:
    """defaultdb and every database the panel adds are copies of the panel's template, which has
    pg_stat_statements: doadmin sees its own statements' text there and, by PostgreSQL's rule,
    not the panel's; it cannot reset the counters, enter the template or the maintenance
    database, create the extension where it is missing, or join pg_read_all_stats through the panel."""
    roles.add_database(cluster, "reports")
    services.collect_cluster(cluster)  # the monitor role's statements are recorded
    for dbname in ("defaultdb", "reports"):
        with as_doadmin(cluster, dbname) as conn:
            conn.execute("SELECT 1 AS doadmin_marker")
            texts = dict(
                conn.execute(
                    "SELECT r.rolname, pg_catalog.string_agg(DISTINCT s.query, ' | ') FROM public.pg_stat_statements s "
                    "JOIN pg_catalog.pg_roles r ON r.oid = s.userid GROUP BY 1"
                ).fetchall()
            )
            assert "doadmin_marker" in texts["doadmin"]
            assert texts[settings.PANEL_MONITOR_ROLE] == "<insufficient privilege>", texts
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT public.pg_stat_statements_reset()")
            member = conn.execute("SELECT pg_has_role('doadmin', 'pg_read_all_stats', 'MEMBER')").fetchone()
            assert member == (False,)
    for dbname in ("postgres", dbconn.STATEMENTS_TEMPLATE):
        with pytest.raises(
            psycopg.OperationalError, match="not currently accepting connections|permission denied"
        ):
            as_doadmin(cluster, dbname).close()
    with as_doadmin(cluster) as conn:
        conn.execute("CREATE DATABASE made_with_sql")  # from template1: no extension there
    try:
        with (
            as_doadmin(cluster, "made_with_sql") as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute("CREATE EXTENSION pg_stat_statements")
    finally:
        with as_doadmin(cluster) as conn:
            conn.execute("DROP DATABASE made_with_sql")


def server_calls(cluster: Cluster, prefix: str) -> int:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(calls), 0)::bigint FROM public.pg_stat_statements WHERE query LIKE %s",
            [prefix + "%"],
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.django_db
def test_the_tab_and_the_command_show_the_run_with_its_calls(cluster: Cluster, client: Client) -> None:
    services.collect_cluster(cluster)
    calls = processed(pgbench(cluster, ["-n", "-S", "-c", "2", "-j", "1", "-t", "90"]))
    call_command("queries", "collect", cluster.name)

    out = StringIO()
    call_command("queries", "top", cluster.name, "--window", "5m", "--format", "json", stdout=out)
    top_rows = json.loads(out.getvalue())
    assert top_rows[0]["text"].startswith("SELECT abalance") and top_rows[0]["calls"] == calls == 180
    out = StringIO()
    call_command("queries", "top", cluster.name, "--by", "calls", "--limit", "3", stdout=out)
    assert "SELECT abalance FROM pgbench_accounts" in out.getvalue() and " 180 " in out.getvalue()

    client.force_login(cluster.owner)
    html = client.get(reverse("insights:queries", args=[cluster.pk]), {"window": "5m"}).content.decode()
    assert "SELECT abalance FROM pgbench_accounts WHERE aid = $1" in html
    assert f'<td class="text-end" data-figure="calls">{calls}</td>' in html


@pytest.mark.django_db
def test_a_reset_from_the_tab_needs_its_confirmation(cluster: Cluster, client: Client) -> None:
    pgbench(cluster, ["-n", "-S", "-c", "1", "-t", "30"])
    assert server_calls(cluster, "SELECT abalance") >= 30
    with pytest.raises(CommandError, match="--yes"):
        call_command("queries", "reset", cluster.name)
    client.force_login(cluster.owner)
    reset_url = reverse("insights:queries-reset", args=[cluster.pk])
    client.post(reset_url)  # no confirmation: nothing happens
    assert server_calls(cluster, "SELECT abalance") >= 30
    response = client.post(reset_url, {"confirm": "reset"}, follow=True)
    assert "Query statistics were reset." in response.content.decode()
    assert server_calls(cluster, "SELECT abalance") == 0
    assert StatementsState.objects.get(cluster=cluster).reset_at is not None
    assert cluster.events.filter(kind="statements-reset").exists()
