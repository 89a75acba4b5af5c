"""Integration: start, stop, restart and delete a real cluster; queue actions with Redis down."""

from __future__ import annotations

import socket
import time

import psutil
import psycopg
import pytest

from panel.clusters import services
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus
from panel.core.errors import ServiceError, shown_text

pytestmark = pytest.mark.integration


def _serves(cluster: Cluster | str) -> bool:
    uri = cluster if isinstance(cluster, str) else services.connection_details(cluster).uri()
    try:
        with psycopg.connect(uri, connect_timeout=3) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_stop_start_and_restart_in_the_foreground(local_cluster, caplog):
    services.perform_action(local_cluster, "stop")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.STOPPED
    assert local_cluster.online_since is None
    assert postgres.postmaster_pid(local_cluster.pgdata) is None
    assert not _serves(local_cluster)

    services.perform_action(local_cluster, "start")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    first_pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert first_pid is not None
    assert _serves(local_cluster)

    services.perform_action(local_cluster, "restart")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    second_pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert second_pid is not None and second_pid != first_pid
    assert _serves(local_cluster)
    kinds = set(local_cluster.events.values_list("kind", flat=True))
    assert {"stopped", "started", "restarted"} <= kinds

    # A start that fails (something else took the port) is reported and leaves it stopped.
    services.perform_action(local_cluster, "stop")
    # An archiver's error from before (met in a full run) is not this start's reason.
    with open(local_cluster.log_file, "a") as log_file:
        log_file.write("ERROR: [103]: unable to find a valid repository (a stale line)\n")
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", local_cluster.port))
        squatter.listen()
        with caplog.at_level("WARNING"), pytest.raises(ServiceError, match="Could not start the cluster"):
            services.perform_action(local_cluster, "start")
    # The server's own words are the administrator's, in the log (issue 38, item 2).
    assert "could not create any TCP/IP sockets" in caplog.text
    assert "a stale line" not in caplog.text
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.STOPPED
    assert "Could not start the cluster" in shown_text(local_cluster.error_message)
    assert local_cluster.events.filter(kind="error").exists()

    services.perform_action(local_cluster, "start")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert local_cluster.error_message == ""
    assert _serves(local_cluster)

    # A stopped cluster is deleted as well as a running one.
    services.perform_action(local_cluster, "stop")
    data_root, pk = local_cluster.data_root, local_cluster.pk
    services.delete_cluster(local_cluster, confirm_name=local_cluster.name)
    assert not data_root.exists()
    assert not Cluster.objects.filter(pk=pk).exists()


def test_request_action_refuses_and_with_redis_down_restores_the_status(local_cluster, redis_down):
    with pytest.raises(ServiceError, match="cannot start now"):
        services.request_action(local_cluster, "start")
    with pytest.raises(ServiceError, match="Unknown action"):
        services.request_action(local_cluster, "explode")

    started = time.monotonic()
    with pytest.raises(ServiceError, match="not reachable"):
        services.request_action(local_cluster, "stop")
    assert time.monotonic() - started < 5, "a form waits for the broker to answer"
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None


def test_request_action_is_carried_out_by_a_worker(local_cluster, celery_worker, wait_until):
    cluster = services.request_action(local_cluster, "stop")
    assert cluster.status in {ClusterStatus.STOPPING, ClusterStatus.STOPPED}

    def stopped() -> bool:
        local_cluster.refresh_from_db()
        return local_cluster.status == ClusterStatus.STOPPED

    wait_until(stopped, timeout=30, message="the worker stopping the cluster")
    assert postgres.postmaster_pid(local_cluster.pgdata) is None


def test_delete_refuses_a_wrong_name_then_removes_everything(local_cluster):
    pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert pid is not None
    with pytest.raises(ServiceError, match="to confirm") as refused:
        services.delete_cluster(local_cluster, confirm_name="db-tes")
    assert refused.value.field == "confirm_name"
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.ONLINE
    assert postgres.postmaster_pid(local_cluster.pgdata) == pid
    assert local_cluster.pgdata.is_dir()

    # The right name removes the processes, the files and the row.
    data_root, pk = local_cluster.data_root, local_cluster.pk
    uri = services.connection_details(local_cluster).uri()

    services.delete_cluster(local_cluster, confirm_name=local_cluster.name)

    assert not Cluster.objects.filter(pk=pk).exists()
    assert not data_root.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not _serves(uri)


def test_a_failed_start_says_so_in_coded_words_and_keeps_pg_ctls_text_for_the_log(
    local_cluster, owner, caplog
):
    """Issue 38, item 2: pg_ctl's words (with the data directory's path) go to the log; the page,
    the event and the refusal carry a coded, translated sentence, in English and German."""
    from django.test import Client

    services.perform_action(local_cluster, "stop")
    auto_conf = local_cluster.pgdata / "postgresql.auto.conf"
    auto_conf.write_text(auto_conf.read_text() + "\nshared_buffers = 'not a size'\n")
    with caplog.at_level("WARNING"), pytest.raises(ServiceError) as failed:
        services.perform_action(Cluster.objects.get(pk=local_cluster.pk), "start")
    assert failed.value.code == "cluster.action_failed"
    logged = next(r.getMessage() for r in caplog.records if "start of cluster" in r.getMessage())
    raw = logged.split(" failed: ", 1)[1]  # the engine's text (pg_ctl's, pgBackRest's): the log only
    assert "pg_ctl" in raw, raw
    event = local_cluster.events.filter(kind="error").latest("created_at")
    for shown in (str(failed.value), event.shown):
        assert raw not in shown and "pg_ctl" not in shown and str(local_cluster.data_root) not in shown
    client = Client()
    client.force_login(owner)
    for language, sentence in (
        ("en", "Could not start the cluster. The panel&#x27;s log holds the details"),
        ("de", "„Starten“ ist fehlgeschlagen. Das Log des Panels enthält die Einzelheiten"),
    ):
        page = client.get(f"/clusters/{local_cluster.pk}/", headers={"accept-language": language})
        text = page.content.decode()
        assert sentence in text, language
        assert raw not in text and "pg_ctl" not in text, language
        assert str(local_cluster.data_root) not in text, language
    auto_conf.write_text(auto_conf.read_text().replace("shared_buffers = 'not a size'", ""))
    services.perform_action(Cluster.objects.get(pk=local_cluster.pk), "start")
    assert Cluster.objects.get(pk=local_cluster.pk).error_message == ""
