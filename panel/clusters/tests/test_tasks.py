"""The Celery tasks are thin: they carry an id and call the service (run here in-process)."""

from __future__ import annotations

import logging

import pytest

from panel.clusters import services, tasks
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterEvent, ClusterStatus

from .conftest import make_cluster_row

pytestmark = pytest.mark.integration


def test_the_tasks_have_the_names_the_services_send():
    assert tasks.provision.name == "panel.clusters.tasks.provision"
    assert tasks.cluster_action.name == "panel.clusters.tasks.cluster_action"
    assert tasks.reconcile.name == "panel.clusters.tasks.reconcile"


def test_an_action_on_a_deleted_cluster_is_ignored(owner, monkeypatch, caplog):
    # The user deleted the cluster while its stop was queued.
    cluster = make_cluster_row(owner)
    cluster_id = str(cluster.pk)
    cluster.delete()
    performed: list[tuple[object, str]] = []
    monkeypatch.setattr(services, "perform_action", lambda c, action: performed.append((c, action)))

    with caplog.at_level(logging.INFO, logger="panel.clusters"):
        assert tasks.cluster_action(cluster_id, "stop") is None

    assert performed == []
    assert not Cluster.objects.exists()
    assert not ClusterEvent.objects.exists()
    assert caplog.records == []


def test_provision_task_provisions_and_a_second_delivery_does_nothing(owner, transactional_db):
    cluster = services.create_cluster(owner, name="db-task", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    tasks.provision(str(cluster.pk))
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE, cluster.error_message
    pid = postgres.postmaster_pid(cluster.pgdata)

    tasks.provision(str(cluster.pk))  # redelivered: the claim fails, nothing is redone

    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.ONLINE
    assert postgres.postmaster_pid(cluster.pgdata) == pid
    assert cluster.events.filter(kind="online").count() == 1

    tasks.cluster_action(str(cluster.pk), "stop")
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.STOPPED
    # A stopped cluster stays stopped (the node's etcd, left by an earlier module's cluster with
    # standbys, may be stopped by the same round: not this cluster's business).
    assert [note for note in tasks.reconcile() if not note.startswith("etcd: ")] == []
    assert postgres.postmaster_pid(cluster.pgdata) is None
    services.delete_cluster(cluster, confirm_name=cluster.name)
