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
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration


def _serves(cluster: Cluster | str) -> bool:
    uri = cluster if isinstance(cluster, str) else services.connection_details(cluster).uri()
    try:
        with psycopg.connect(uri, connect_timeout=3) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.OperationalError:
        return False


def test_stop_start_and_restart_in_the_foreground(local_cluster):
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
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", local_cluster.port))
        squatter.listen()
        with pytest.raises(ServiceError, match="could not create any TCP/IP sockets"):
            services.perform_action(local_cluster, "start")
    local_cluster.refresh_from_db()
    assert local_cluster.status == ClusterStatus.STOPPED
    assert "TCP/IP" in local_cluster.error_message
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
