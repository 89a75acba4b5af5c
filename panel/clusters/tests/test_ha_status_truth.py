"""Issue 38, item 1: a cluster with standbys is online while Patroni has a primary that accepts
writes, whatever member 1's data directory says. A collection that meets a switchover (member 1's
postmaster stopped for the handover) leaves it online with no false event; a member really
missing makes it degraded with the member named, and the reconciler brings it back online."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus, MemberRole
from panel.clusters.services import reconciler
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import ha_health as health_rules
from panel.clusters.standbys.services import ha, ha_health, switchover
from panel.insights.lib.metrics import POSTGRES
from panel.insights.services import collection
from tests.fixtures.clusters import module_cluster

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

RECOVERY_TIMEOUT = 180  # a killed member back through Patroni, on a loaded machine


@pytest.fixture(scope="module")
def ha_cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    with module_cluster(
        django_db_blocker, "truth-owner", "db-truth", "db-s-1vcpu-2gb", num_nodes=2
    ) as cluster:
        yield cluster


def _listed_status(cluster: Cluster) -> str:
    out = io.StringIO()
    call_command("cluster", "list", stdout=out)
    row = next(line for line in out.getvalue().splitlines() if line.split()[:1] == [cluster.name])
    return row.split()[2]


def _primary_name(cluster: Cluster) -> str:
    ha.refresh_members(cluster)
    return cluster.members.get(role=MemberRole.PRIMARY).name


def test_a_collection_that_meets_a_switchover_leaves_the_cluster_online(ha_cluster, monkeypatch):
    cluster = ha_cluster
    assert ha.wait_healthy(cluster, RECOVERY_TIMEOUT)
    if _primary_name(cluster) != "member-1":  # member 1's data directory is the cluster's pgdata
        switchover.switchover(cluster, "member-1")
        assert ha.wait_healthy(cluster, RECOVERY_TIMEOUT)
    started = timezone.now()
    met: list[object] = []
    real_wait = switchover.Switchover.wait_writable

    def collect_meanwhile(self: switchover.Switchover) -> bool:
        # Patroni stops the old primary (member 1) now: the periodic collection runs right then.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and postgres.postmaster_pid(cluster.pgdata) is not None:
            time.sleep(0.01)
        while time.monotonic() < deadline and postgres.postmaster_pid(cluster.pgdata) is None:
            snap = collection.collect_cluster(Cluster.objects.get(pk=cluster.pk))
            if snap.up.get(POSTGRES) is False:
                met.append(snap)
                break
        return real_wait(self)

    monkeypatch.setattr(switchover.Switchover, "wait_writable", collect_meanwhile)
    assert switchover.switchover(cluster, "member-2") == "member-2"
    monkeypatch.undo()
    assert met, "the collection did not meet member 1's postmaster stopped"

    # Online within 30 s, as the periodic reconciler and collection see it, and it stays so.
    deadline = time.monotonic() + 30
    while _listed_status(cluster) != "online" and time.monotonic() < deadline:
        reconciler.reconcile()
        collection.collect_cluster(Cluster.objects.get(pk=cluster.pk))
    assert _listed_status(cluster) == "online"
    for _ in range(3):
        reconciler.reconcile()
        collection.collect_cluster(Cluster.objects.get(pk=cluster.pk))
        assert _listed_status(cluster) == "online"
    since = cluster.events.filter(created_at__gte=started)
    assert not since.filter(kind__in=["postmaster-gone", "degraded"]).exists(), list(
        since.values_list("kind", "message")
    )


def test_a_missing_member_degrades_the_cluster_naming_it_and_the_reconciler_heals_it(ha_cluster, monkeypatch):
    cluster = ha_cluster
    assert ha.wait_healthy(cluster, RECOVERY_TIMEOUT)
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.ONLINE)
    standby = cluster.members.get(role=MemberRole.STANDBY)
    monkeypatch.setattr(health_rules, "GRACE", health_rules.GRACE * 0)  # no waiting out the grace here
    patroni.kill_member(ha.member_config_path(cluster, standby), postgres.postmaster_pid(standby.pgdata))
    deadline = time.monotonic() + 30
    while not ha_health.assess(Cluster.objects.get(pk=cluster.pk)) and time.monotonic() < deadline:
        time.sleep(0.5)
    cluster.refresh_from_db()
    assert cluster.status == ClusterStatus.DEGRADED
    event = cluster.events.filter(kind="degraded").latest("created_at")
    assert standby.name in event.message, event.message
    out = io.StringIO()
    call_command("cluster", "show", cluster.name, stdout=out)
    assert "Degraded:" in out.getvalue() and standby.name in out.getvalue(), out.getvalue()
    client = Client()
    client.force_login(cluster.owner)
    for language, words in (
        ("en", "Not running or not streaming"),
        ("de", "Läuft nicht oder repliziert nicht"),
    ):
        page = client.get(f"/clusters/{cluster.pk}/", headers={"accept-language": language}).content.decode()
        assert f"{words}: {standby.name}" in page, language

    deadline = time.monotonic() + RECOVERY_TIMEOUT
    notes: list[str] = []
    while _listed_status(cluster) != "online" and time.monotonic() < deadline:
        notes += reconciler.reconcile()
        time.sleep(1)
    assert _listed_status(cluster) == "online", (notes, ha.read_statuses(cluster))
    assert cluster.events.filter(kind="recovered").exists()


def test_a_change_of_primary_the_reconciler_sees_first_is_acted_on(ha_cluster):
    """Issue 39: the cluster's node back after a failover elsewhere, its reconciler's look (assess)
    may come before its member watch's. The change of primary is acted on all the same (an
    event; PgBouncer repointed by the same call): recorded silently, it left the watch nothing
    to see and the cluster's PgBouncer on the old primary, a standby by then."""
    cluster = ha_cluster
    assert ha.wait_healthy(cluster, RECOVERY_TIMEOUT)
    primary = cluster.members.get(role=MemberRole.PRIMARY)
    standby = cluster.members.get(role=MemberRole.STANDBY)
    # The rows as the cluster's node left them when it was lost: the other member the primary.
    cluster.members.filter(pk=primary.pk).update(role=MemberRole.STANDBY)
    cluster.members.filter(pk=standby.pk).update(role=MemberRole.PRIMARY)
    before = cluster.events.filter(kind="failover").count()
    ha_health.assess(Cluster.objects.get(pk=cluster.pk))
    assert cluster.members.get(pk=primary.pk).role == MemberRole.PRIMARY
    assert cluster.events.filter(kind="failover").count() == before + 1
    event = cluster.events.filter(kind="failover").latest("created_at")
    assert f"{primary.name} is the primary now (was {standby.name})" in event.message, event.message
