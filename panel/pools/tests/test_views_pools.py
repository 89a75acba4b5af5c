"""The Connection Pools tab against cluster rows: refusals come before PgBouncer is touched, so no
server runs; the changes that must really reach PgBouncer are in test_views_live.py."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from panel import crypto
from panel.clusters.models import Cluster, ClusterKind
from panel.clusters.tests.conftest import ADMIN_PASSWORD, APP_PASSWORD, CA_PEM, make_cluster_row
from panel.pools.models import ConnectionPool
from panel.pools.services import PoolsOverview, PoolStats

HTMX = {"HX-Request": "true"}
INVALID_NAMES = [
    ("bad name;", "(space)"),
    ("has space", "(space)"),
    ("semi;colon", "(semicolon)"),
    ("hash#tag", "(hash)"),
    ("key=value", "(equals sign)"),
    ("ünïcode", "U+00FC"),
    ("x" * 61, "this one has 61"),
    ("ab", "this one has 2"),
    ("pgbouncer", "is reserved"),
    ("PgBouncer", "is reserved"),
]


@pytest.fixture
def cluster_row(owner) -> Cluster:
    """A 4 GB-plan cluster row (97 connections for pools); no PostgreSQL or PgBouncer behind it."""
    return make_cluster_row(owner)


def _create(client, cluster: Cluster, **changes: str) -> str:
    data = {"name": "test-pool", "database": "appdb", "user": "", "mode": "transaction", "size": "10"}
    data.update(changes)
    response = client.post(reverse("pools:create", args=[cluster.pk]), data, headers=HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="pools-tab">'), "an HTMX post answers with the tab only"
    return text


def _input(page: str, field_id: str) -> str:
    match = re.search(rf"<(?:input|select)[^>]*id=\"{field_id}\"[^>]*>", page)
    assert match, f"no #{field_id} in the page"
    return match.group(0)


def _pool(cluster: Cluster, name: str = "test-pool", **fields: object) -> ConnectionPool:
    values: dict[str, object] = {"database": "appdb", "user": "", "mode": "transaction", "size": 10}
    values.update(fields)
    return ConnectionPool.objects.create(cluster=cluster, name=name, **values)


# --- the tab ---------------------------------------------------------------------------------------


def test_the_empty_tab_shows_the_budget_and_says_what_to_do(owner_client, cluster_row):
    page = owner_client.get(reverse("pools:list", args=[cluster_row.pk])).content.decode()
    assert "0 of 97 connections allocated to pools" in page
    assert "Create a connection pool to" in page
    assert 'id="create-pool-form"' in page
    assert "Inbound user (whoever connects)" in page
    # One sentence for both choices (it used to say the user is always the inbound one).
    assert (
        "Leave it empty to log in to the server as whichever user connects (the inbound user), "
        "or pick a user to make every client of this pool log in as that user."
    ) in page
    assert 'value="transaction" checked' in page  # the default mode
    assert "multi-statement transactions are refused" in page  # each mode explained
    assert 'data-used="0" data-total="97"' in page  # the budget for the as-you-type figure
    assert "0 of 97 used — 97 left" in page
    assert "hx-disabled-elt=\"find button[type='submit']\"" in page
    assert "js/pools.js" in page
    assert 'hx-trigger="every 3s' not in page  # nothing to poll without pools
    assert 'aria-current="page" href="/clusters/' in page  # the tab is active


def test_the_table_lists_pools_and_polls_live_figures(owner_client, cluster_row):
    _pool(cluster_row, "test-pool", size=12)
    _pool(cluster_row, "app-pool", user="app", mode="session", size=5)
    page = owner_client.get(reverse("pools:list", args=[cluster_row.pk])).content.decode()
    assert "17 of 97 connections allocated to pools" in page
    assert 'data-pool="test-pool"' in page
    assert 'data-pool="app-pool"' in page
    assert "Inbound user" in page
    assert "<code>app</code>" in page
    stats_url = reverse("pools:stats", args=[cluster_row.pk])
    assert f'hx-get="{stats_url}"' in page
    assert 'hx-trigger="every 3s"' in page  # panel.js pauses it while the tab is hidden
    assert "Create a connection pool to" not in page


def test_the_stats_fragment_says_pgbouncer_is_down_instead_of_crashing(owner_client, cluster_row):
    _pool(cluster_row)
    response = owner_client.get(reverse("pools:stats", args=[cluster_row.pk]), headers=HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="pools-live"')
    assert "PgBouncer is not answering" in text
    assert "Unavailable" in text
    assert "10 of 97 connections allocated to pools" in text


def test_attached_servers_get_no_pool_form(owner_client, owner):
    cluster = make_cluster_row(
        owner, "db-attached", kind=ClusterKind.EXTERNAL, plan_slug="", pooler_port=None
    )
    page = owner_client.get(reverse("pools:list", args=[cluster.pk])).content.decode()
    assert "available for clusters provisioned by this panel" in page
    assert 'id="create-pool-form"' not in page


# --- create: refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "reason"), INVALID_NAMES, ids=lambda v: repr(v[:12]))
def test_it_refuses_invalid_names_inline(owner_client, cluster_row, name, reason):
    page = _create(owner_client, cluster_row, name=name)
    assert 'aria-invalid="true"' in _input(page, "id_name")
    assert reason in page.replace("&#x27;", "'").replace("&quot;", '"')
    assert 'class="collapse show"' in page  # the form stays open with its errors
    assert not ConnectionPool.objects.exists()


def test_it_refuses_a_pool_over_budget_on_the_size_field(owner_client, cluster_row):
    _pool(cluster_row, "big-pool", size=90)
    page = _create(owner_client, cluster_row, size="8")
    assert 'aria-invalid="true"' in _input(page, "id_size")
    assert "Only 7 of the cluster&#x27;s 97 connections are left" in page
    assert list(ConnectionPool.objects.values_list("name", flat=True)) == ["big-pool"]


def test_it_refuses_a_duplicate_name(owner_client, cluster_row):
    _pool(cluster_row)
    page = _create(owner_client, cluster_row)
    assert "A pool named “test-pool” already exists." in page
    assert ConnectionPool.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"size": "0"}, "id_size"), ({"size": "many"}, "id_size"), ({"database": "nope"}, "id_database")],
)
def test_it_refuses_bad_sizes_and_unknown_databases(owner_client, cluster_row, changes, field):
    page = _create(owner_client, cluster_row, **changes)
    assert 'aria-invalid="true"' in _input(page, field)
    assert not ConnectionPool.objects.exists()


def test_it_refuses_pools_while_the_cluster_is_stopped(owner_client, owner):
    cluster = make_cluster_row(owner, "db-stopped", status="stopped")
    page = _create(owner_client, cluster)
    assert "start it first" in page
    assert not ConnectionPool.objects.exists()


# --- one pool: connection details, edit and delete refusals ---------------------------------------------


def test_the_pool_page_shows_pooler_port_and_pool_name_and_hides_the_password(owner_client, cluster_row):
    pool = _pool(cluster_row)
    page = owner_client.get(reverse("pools:detail", args=[cluster_row.pk, pool.pk])).content.decode()
    assert '<code class="conn-value">26901</code>' in page  # the pooler port, not the server's 26900
    assert '<code class="conn-value">test-pool</code>' in page  # database = the pool name
    assert ADMIN_PASSWORD not in page
    assert "********" in page
    assert reverse("clusters:ca-certificate", args=[cluster_row.pk]) in page
    assert 'id="conn-user"' in page  # an inbound pool lets you pick the user
    assert 'value="test-pool" readonly disabled' in page  # the name is shown, not editable


def test_show_reveals_the_password_and_the_uri_uses_the_pool(owner_client, cluster_row):
    pool = _pool(cluster_row)
    url = reverse("pools:connection-reveal", args=[cluster_row.pk, pool.pk])
    response = owner_client.get(url, {"view": "uri", "user": "app"}, headers=HTMX)
    assert response.status_code == 200
    assert response["Cache-Control"].startswith("max-age=0")
    text = response.content.decode()
    assert f"postgresql://app:{APP_PASSWORD}@localhost:26901/test-pool?sslmode=require" in text
    hidden = owner_client.get(
        reverse("pools:connection", args=[cluster_row.pk, pool.pk]), {"view": "uri"}, headers=HTMX
    ).content.decode()
    assert "postgresql://doadmin:********@localhost:26901/test-pool?sslmode=require" in hidden
    assert ADMIN_PASSWORD not in hidden


def test_the_copy_endpoint_gives_each_format_and_a_fixed_pool_keeps_its_user(owner_client, cluster_row):
    pool = _pool(cluster_row, user="app")
    url = reverse("pools:connection-secret", args=[cluster_row.pk, pool.pk])
    flags = owner_client.get(url, {"format": "flags", "user": "doadmin"}).content.decode()
    assert flags == (
        f"PGPASSWORD={APP_PASSWORD} PGSSLMODE=require psql -U app -h localhost -p 26901 -d test-pool"
    )
    assert owner_client.get(url, {"format": "password"}).content.decode() == APP_PASSWORD
    assert owner_client.get(url, {"format": "bogus"}).status_code == 400
    page = owner_client.get(reverse("pools:detail", args=[cluster_row.pk, pool.pk])).content.decode()
    assert 'id="conn-user"' not in page
    assert "always logs in as <code>app</code>" in page


def test_the_ca_link_downloads_the_clusters_certificate(owner_client, cluster_row):
    response = owner_client.get(reverse("clusters:ca-certificate", args=[cluster_row.pk]))
    assert response.content.decode() == CA_PEM


def test_an_edit_over_budget_is_refused_inline_and_changes_nothing(owner_client, cluster_row):
    pool = _pool(cluster_row, size=10)
    _pool(cluster_row, "other", size=80)
    url = reverse("pools:edit", args=[cluster_row.pk, pool.pk])
    response = owner_client.post(
        url, {"database": "appdb", "user": "", "mode": "transaction", "size": "18"}, headers=HTMX
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="pool-page">')
    assert 'aria-invalid="true"' in _input(text, "id_size")
    assert "Only 17 of the cluster&#x27;s 97 connections are left" in text
    pool.refresh_from_db()
    assert pool.size == 10
    assert 'data-used="90" data-total="97" data-own="10"' in text


def test_the_delete_confirmation_warns_that_clients_are_disconnected(owner_client, cluster_row):
    pool = _pool(cluster_row)
    url = reverse("pools:delete", args=[cluster_row.pk, pool.pk])
    text = owner_client.get(url, headers=HTMX).content.decode()
    assert text.lstrip().startswith('<form id="delete-pool-form"')
    assert "every client connected to it is disconnected" in text
    assert "0 clients are connected to this pool now." in text
    full = owner_client.get(url).content.decode()
    assert "Delete pool test-pool" in full


def test_a_refused_delete_keeps_the_pool_and_shows_why(owner_client, cluster_row):
    # Two pools and no PostgreSQL behind the row: the remaining pool's secrets cannot be read.
    cluster_row.superuser_password_encrypted = crypto.encrypt("not-used")
    cluster_row.save(update_fields=["superuser_password_encrypted"])
    pool, _other = _pool(cluster_row), _pool(cluster_row, "other-pool")
    url = reverse("pools:delete", args=[cluster_row.pk, pool.pk])
    response = owner_client.post(url, headers=HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<form id="delete-pool-form"')
    assert "Could not read the users&#x27; secrets from PostgreSQL" in text
    assert "0 clients are connected to this pool now." in text
    assert ConnectionPool.objects.filter(pk=pool.pk).exists()


def test_a_pool_with_waiting_clients_is_marked_saturated(cluster_row):
    busy, calm = _pool(cluster_row, "busy-pool", size=5), _pool(cluster_row, "calm-pool", size=5)
    overview = PoolsOverview(
        used=10,
        total=97,
        pools=[(busy, PoolStats(5, 12, 5, 0, 2.5)), (calm, PoolStats(1, 0, 1, 3, 0.0))],
        running=True,
        error_message="",
    )
    html = render_to_string(
        "pools/list.html#live", {"cluster": cluster_row, "overview": overview, "poolable": True}
    )
    assert '<tr data-pool="busy-pool" class="pool-saturated">' in html
    assert '<tr data-pool="calm-pool">' in html
    assert html.count("Saturated") == 1
    assert '5 / <span class="pool-waiting">12</span>' in html
    assert "2.5 s" in html
    assert "3 / 0" not in html and "1 / 3" in html  # servers active / idle
