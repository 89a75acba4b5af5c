"""What goes wrong: broken configurations, a taken port, a killed PgBouncer, racing requests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.pools import services
from panel.pools.engine import disk, rendering, supervisor
from panel.pools.lib import pgbouncer_ini
from panel.pools.models import ConnectionPool, Pooler, PoolerStatus
from panel.pools.tests.test_services_create import INVALID_NAMES

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    """A running 1 GB-plan cluster (22 connections for pools); its PgBouncer is stopped afterwards."""
    yield shared_local_cluster
    services.stop_pgbouncer(shared_local_cluster)


def ini_path(cluster: Cluster) -> Path:
    return cluster.data_root / "pgbouncer" / "pgbouncer.ini"


def serves(cluster: Cluster, name: str) -> bool:
    pool = cluster.pools.get(name=name)
    try:
        with psycopg.connect(services.pool_connection_details(pool).uri(), connect_timeout=5) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def test_every_refusal_comes_before_a_file_is_written(cluster: Cluster) -> None:
    services.create_pool(cluster, "good", "defaultdb", "", "transaction", 20)
    before = snapshot(ini_path(cluster))
    attempts = [{"name": name} for name in INVALID_NAMES] + [
        {"name": "good"},
        {"size": 3},
        {"database": "missing"},
        {"user": "ghost"},
    ]
    for changes in attempts:
        values = {"name": "second", "database": "defaultdb", "user": "", "mode": "transaction", "size": 1}
        values.update(changes)
        with pytest.raises(ServiceError) as exc_info:
            services.create_pool(cluster, **values)  # type: ignore[arg-type]
        assert exc_info.value.field in {"name", "size", "database", "user"}, changes
    assert snapshot(ini_path(cluster)) == before
    assert list(cluster.pools.values_list("name", flat=True)) == ["good"]


def test_a_configuration_pgbouncer_misloads_is_rolled_back_with_its_log_line(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    services.create_pool(cluster, "good", "defaultdb", "", "transaction", 5)
    before = ini_path(cluster).read_text()

    real_render = pgbouncer_ini.render

    def render_with_a_bad_line(*args: object) -> str:
        # A renderer bug: PgBouncer answers RELOAD with success and loads the file up to here.
        text = real_render(*args)  # type: ignore[arg-type]
        return text.replace("late-pool = ", "this line is broken\nlate-pool = ")

    monkeypatch.setattr(rendering, "render", render_with_a_bad_line)
    with pytest.raises(ServiceError) as exc_info:
        services.create_pool(cluster, "late-pool", "defaultdb", "", "transaction", 5)
    message = exc_info.value.message
    assert "previous one stays in force" in message and "log holds the details" in message
    assert "syntax error" not in message and str(ini_path(cluster)) not in message
    # PgBouncer's own line and what the panel found are the administrator's: the log.
    assert "Pool 'late-pool' is missing from PgBouncer." in caplog.text
    assert "ERROR syntax error in configuration" in caplog.text

    assert ini_path(cluster).read_text() == before
    assert list(cluster.pools.values_list("name", flat=True)) == ["good"]
    assert serves(cluster, "good")
    assert services.pooler_running(cluster)


def test_a_taken_port_is_reported_and_the_previous_configuration_stays(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    services.create_pool(cluster, "good", "defaultdb", "", "transaction", 5)
    before = ini_path(cluster).read_text()
    services.stop_pgbouncer(cluster)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", int(cluster.pooler_port or 0)))
    squatter.listen()
    try:
        with pytest.raises(ServiceError) as exc_info:
            services.create_pool(cluster, "second", "defaultdb", "", "transaction", 5)
        assert exc_info.value.code == "pool.port_taken"
        assert f"could not listen on its port {cluster.pooler_port}" in exc_info.value.message
        assert "Address already in use" not in exc_info.value.message
        assert "Address already in use" in caplog.text  # the system's words: the log
        assert ini_path(cluster).read_text() == before
        assert list(cluster.pools.values_list("name", flat=True)) == ["good"]
        assert not services.pooler_running(cluster)
        # The reconciler keeps trying and shows why it cannot.
        assert "PgBouncer failed" in (services.reconcile_pgbouncer(cluster) or "")
        assert Pooler.objects.get(cluster=cluster).status == PoolerStatus.ERROR
        # The pools page says it in the reader's language, without the system's words.
        reader = Client()
        reader.force_login(cluster.owner)
        reader.cookies[settings.LANGUAGE_COOKIE_NAME] = "de"
        page = reader.get(reverse("pools:list", args=[cluster.pk])).content.decode()
        assert f"PgBouncer konnte nicht auf seinem Port {cluster.pooler_port} lauschen" in page
        assert "Address already in use" not in page and "cannot listen" not in page
    finally:
        squatter.close()
    assert services.reconcile_pgbouncer(cluster) == f"{cluster.name}: PgBouncer restarted"
    assert serves(cluster, "good")
    assert services.pools_overview(cluster).error_message == ""


def test_a_killed_pgbouncer_is_restarted_by_the_reconciler(cluster: Cluster) -> None:
    services.create_pool(cluster, "test-pool", "defaultdb", "", "transaction", 5)
    assert services.reconcile_all() == []  # running: nothing to do
    supervisor.kill(disk.bouncer_files(cluster))
    assert not services.pooler_running(cluster)
    assert services.pool_stats(cluster) is None

    assert services.reconcile_all() == [f"{cluster.name}: PgBouncer restarted"]
    assert services.pooler_running(cluster)
    assert serves(cluster, "test-pool")
    kinds = list(cluster.events.values_list("kind", flat=True)[:2])
    assert kinds == ["pooler-recovered", "pooler-down"]


def test_two_concurrent_creations_over_budget_cannot_both_succeed(cluster: Cluster) -> None:
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def create(name: str) -> None:
        try:
            barrier.wait(timeout=10)
            services.create_pool(cluster, name, "defaultdb", "", "transaction", 12)
            outcomes[name] = "created"
        except ServiceError as exc:
            outcomes[name] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(name,)) for name in ("pool-a", "pool-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    created = [name for name, outcome in outcomes.items() if outcome == "created"]
    refused = [outcome for outcome in outcomes.values() if isinstance(outcome, ServiceError)]
    assert len(created) == 1 and len(refused) == 1, outcomes
    assert refused[0].field == "size"
    assert list(ConnectionPool.objects.values_list("name", flat=True)) == created
    assert services.pool_budget(cluster) == (12, 22)
    assert serves(cluster, created[0])


def test_a_pool_blocks_deleting_its_database_and_user(cluster: Cluster) -> None:
    from panel.clusters.services import roles

    roles.add_user(cluster, "app")
    roles.add_database(cluster, "appdb")
    services.create_pool(cluster, "app-pool", "appdb", "app", "transaction", 2)
    with pytest.raises(ServiceError, match="“appdb” is used by the pool\\(s\\) “app-pool”"):
        services.ensure_not_used(cluster, database="appdb")
    with pytest.raises(ServiceError, match="“app” is used by the pool\\(s\\) “app-pool”"):
        services.ensure_not_used(cluster, user="app")
    # Once the pool is gone, both may go; the auth file forgets the user.
    services.delete_pool(cluster.pools.get())
    services.ensure_not_used(cluster, database="appdb", user="app")
    roles.delete_user(cluster, "app")
    roles.delete_database(cluster, "appdb")
