"""Server connections the pools hold (issue 11, item 1), with real pgbench through a real PgBouncer.

After a load through a pool, PgBouncer keeps its server connections idle; each holds one of the
server's slots, so a pool holding the whole budget locks direct clients out. The panel shows the
held count and the direct headroom live, warns on the Overview and the Pools tab, releases a
pool's idle servers on request (RECONNECT), and PgBouncer's idle timeout gives them back by itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.urls import reverse

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from panel.pools import services
from panel.pools.engine.disk import bouncer_files
from panel.pools.models import ConnectionPool
from panel.pools.tests.test_integration_pgbench import pgbench, with_pgbench_tables

pytestmark = pytest.mark.integration

LOCKOUT = "direct connections are refused until they are released"


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A 1 GB-plan cluster (25 max_connections, 3 reserved: 22 slots) with pgbench's tables."""
    yield from with_pgbench_tables(shared_local_cluster)


def load(cluster: Cluster, pool: ConnectionPool, clients: int = 15, seconds: int = 2) -> None:
    result = pgbench(
        cluster,
        ["-c", str(clients), "-j", "1", "-T", str(seconds), "-S"],
        port=int(cluster.pooler_port or 0),
        dbname=pool.name,
    )
    assert result.returncode == 0, result.stderr[-2000:]


def fill(cluster: Cluster, pool: ConnectionPool) -> None:
    """Load through the pool until it holds the whole budget (direct clients refused): how many
    servers PgBouncer opens depends on how many clients wait at once, fewer on a loaded machine."""
    for _attempt in range(5):
        load(cluster, pool, clients=30)
        if not direct_works(cluster):
            return
    pytest.fail("the pool never held the whole budget")


def direct_works(cluster: Cluster) -> bool:
    details = cluster_services.connection_details(cluster)
    assert details.user == "doadmin"
    try:
        with psycopg.connect(details.uri(), connect_timeout=5) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError as exc:
        assert "remaining connection slots are reserved" in str(exc)
        return False


def test_held_slots_are_shown_warned_about_and_released_on_request(owner_client, cluster: Cluster) -> None:
    htmx = {"HX-Request": "true"}
    stats_url = reverse("pools:stats", args=[cluster.pk])
    slots_url = reverse("pools:slots", args=[cluster.pk])

    pool = services.create_pool(cluster, "slot-pool", "defaultdb", "", "transaction", 10)
    load(cluster, pool)
    # The pool keeps its 10 server connections idle; 12 of the 22 slots are left for direct clients.
    tab = owner_client.get(stats_url, headers=htmx).content.decode()
    assert 'data-held="10"' in tab
    assert "Pools hold 10 server connections now (0 active, 10 idle) of 22" in tab
    assert 'data-direct-left="12"' in tab
    assert LOCKOUT not in tab
    assert direct_works(cluster)
    overview = owner_client.get(slots_url, headers=htmx).content.decode()
    assert LOCKOUT not in overview
    # Polls while the cluster has pools.
    assert 'hx-trigger="every 5s"' in overview

    # The pool takes the whole budget: after the load, direct clients are locked out.
    pool = services.update_pool(pool, "defaultdb", "", "transaction", 22)
    fill(cluster, pool)
    tab = owner_client.get(stats_url, headers=htmx).content.decode()
    assert 'data-held="22"' in tab
    assert 'data-direct-left="0"' in tab
    assert "Pools hold 22 idle server connections: " + LOCKOUT in tab
    overview = owner_client.get(slots_url, headers=htmx).content.decode()
    assert "Pools hold 22 idle server connections: " + LOCKOUT in overview
    # The Overview page asks for that warning at once.
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert f'hx-get="{slots_url}" hx-trigger="load"' in page

    # Release the pool's idle servers from the Pools tab: a POST (a GET is refused).
    release_url = reverse("pools:release", args=[cluster.pk, pool.pk])
    assert owner_client.get(release_url).status_code == 405
    response = owner_client.post(release_url, headers={**htmx, "HX-Target": "pools-live"})
    assert response.status_code == 200
    tab = response.content.decode()
    assert "Pool “slot-pool”: 22 idle server connections closed" in tab
    assert 'data-held="0"' in tab
    assert LOCKOUT not in tab
    assert direct_works(cluster)
    assert LOCKOUT not in owner_client.get(slots_url, headers=htmx).content.decode()
    # The pool still serves: servers reopen on demand.
    fill(cluster, pool)

    # The Overview's "Release now" releases every pool and answers with the (now empty) warning.
    response = owner_client.post(
        reverse("pools:release-all", args=[cluster.pk]), headers={**htmx, "HX-Target": "pools-slots"}
    )
    assert "22 idle server connections closed" in response.content.decode()
    assert LOCKOUT not in response.content.decode()
    assert direct_works(cluster)

    # The command line uses the same service.
    fill(cluster, pool)
    out = StringIO()
    call_command("pool", "release", cluster.name, "slot-pool", stdout=out)
    assert "22 idle server connection(s) closed" in out.getvalue()
    assert direct_works(cluster)


def test_release_is_owner_only(owner_client, other_client, cluster: Cluster) -> None:
    pool = services.create_pool(cluster, "mine.pool", "defaultdb", "", "transaction", 2)
    # The pool page's button: a plain form POST that comes back to the pool page, saying so.
    detail = reverse("pools:detail", args=[cluster.pk, pool.pk])
    page = owner_client.get(detail).content.decode()
    assert "after 60 s (server_idle_timeout)" in page
    assert "PgBouncer 1.18 has no per-pool idle timeout" in page
    response = owner_client.post(reverse("pools:release", args=[cluster.pk, pool.pk]), {"next": "detail"})
    assert response.status_code == 302 and response["Location"] == detail
    assert "Pool “mine.pool”: 0 idle server connections closed" in owner_client.get(detail).content.decode()
    assert other_client.post(reverse("pools:release", args=[cluster.pk, pool.pk])).status_code == 404
    assert other_client.post(reverse("pools:release-all", args=[cluster.pk])).status_code == 404
    assert other_client.get(reverse("pools:slots", args=[cluster.pk])).status_code == 404


def held(cluster: Cluster) -> int:
    slots = services.slot_usage(cluster)
    assert slots is not None
    return slots.held


def seconds_until_released(cluster: Cluster, limit: float) -> float:
    """From now until the pools hold no server connection (polling SHOW POOLS every 0.1 s)."""
    start = time.monotonic()
    while held(cluster):
        assert time.monotonic() - start < limit, "the idle servers were not released"
        time.sleep(0.1)
    return time.monotonic() - start


def test_the_idle_timeout_gives_held_slots_back_by_itself(settings, cluster: Cluster) -> None:
    settings.PANEL_POOL_SERVER_IDLE_TIMEOUT = 3
    pool = services.create_pool(cluster, "idle-pool", "defaultdb", "", "transaction", 22)
    load(cluster, pool, clients=30)
    stopped = time.monotonic()
    assert held(cluster) == 22
    assert not direct_works(cluster)
    seconds_until_released(cluster, limit=10 * settings.PANEL_POOL_SERVER_IDLE_TIMEOUT)
    after_stop = time.monotonic() - stopped
    # Released by the timeout, not at once: the slots were held for at least the timeout, and
    # PgBouncer's own check adds little to it.
    assert after_stop >= settings.PANEL_POOL_SERVER_IDLE_TIMEOUT * 0.5
    assert direct_works(cluster)

    # Twice the timeout takes longer: the release follows the setting.
    settings.PANEL_POOL_SERVER_IDLE_TIMEOUT = 6
    services.update_pool(pool, "defaultdb", "", "transaction", 22)
    load(cluster, pool, clients=30)
    stopped = time.monotonic()
    seconds_until_released(cluster, limit=10 * settings.PANEL_POOL_SERVER_IDLE_TIMEOUT)
    assert time.monotonic() - stopped > after_stop


def test_the_reconciler_gives_running_pgbouncers_the_current_idle_timeout(settings, cluster: Cluster) -> None:
    services.create_pool(cluster, "old-pool", "defaultdb", "", "transaction", 2)
    ini = bouncer_files(cluster).ini
    assert "\nserver_idle_timeout = 60\n" in ini.read_text()
    assert services.reconcile_pgbouncer(cluster) is None

    # As a PgBouncer started before the setting changed (PgBouncer's 600 s before issue 11).
    settings.PANEL_POOL_SERVER_IDLE_TIMEOUT = 45
    note = services.reconcile_pgbouncer(cluster)
    assert note == f"{cluster.name}: PgBouncer server_idle_timeout set to 45 s"
    assert "\nserver_idle_timeout = 45\n" in ini.read_text()
    assert services.reconcile_pgbouncer(cluster) is None
