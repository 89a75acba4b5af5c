"""Integration (issue 38, item 6): a restart of a cluster with standbys keeps the primary on the
member that was the primary when the restart began, on the session's real two-member cluster
(Patroni, etcd, HAProxy): switched to member-2, restarted under a writer committing through a
transaction pool, member-2 is still the primary, every postmaster is new, no acknowledged commit
is lost and the progress and the event say what happened. A cluster missing a member starts it
first, then restarts the same way."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster, ClusterStatus, MemberRole
from panel.clusters.services import lifecycle, transitions
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha, switchover
from panel.clusters.tests.test_ha_rolling import Writer, tls_params
from panel.core.errors import ServiceError
from panel.pools import services as pool_services
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "rp-owner"
TIMEOUT = 120


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: object) -> Iterator[Cluster]:
    """The session's two-member cluster, named db-rp for the module; the loan removes the pool
    made here and puts member-1 back as the primary for the next borrower."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-rp") as cluster:
        yield cluster
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)


def _switch_to(cluster: Cluster, member: str) -> None:
    """``member`` made the primary, asked again while it still catches up."""
    deadline = time.monotonic() + 60
    while True:
        try:
            switchover.switchover(cluster, member)
            return
        except ServiceError as exc:
            if exc.code not in switchover.NOT_YET or time.monotonic() > deadline:
                raise
        time.sleep(1)


def _primary(cluster: Cluster) -> str:
    ha.refresh_members(cluster)
    return cluster.members.get(role=MemberRole.PRIMARY).name


@pytest.fixture
def writes_pool(ha_cluster: Cluster) -> Iterator[None]:
    """A transaction pool on the pair, deleted (PgBouncer stopped) before the test's rows are
    rolled back: a PgBouncer left running for rows that are gone would keep its admin password,
    and the next borrower's pooler (a new password) could not PAUSE nor RELOAD it."""
    pool = pool_services.create_pool(ha_cluster, "writes", "defaultdb", None, "transaction", 5)
    yield
    pool_services.delete_pool(pool)


@pytest.mark.usefixtures("writes_pool")
def test_a_restart_keeps_the_primary_on_member_2(
    ha_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = ha_cluster
    _switch_to(cluster, "member-2")
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    assert _primary(cluster) == "member-2"
    writer = Writer(tls_params(cluster, "writes", cluster.pooler_port))
    with psycopg.connect(**writer.params) as conn:
        conn.execute("DROP TABLE IF EXISTS acked")  # the pair is lent to other modules too
        conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
    before = {m.name: postgres.postmaster_pid(m.pgdata) for m in cluster.members.all()}
    steps: list[str] = []
    set_progress = transitions.set_progress

    def recorded(target: Cluster, percent: int, message: str) -> None:
        steps.append(message)
        set_progress(target, percent, message)

    monkeypatch.setattr(transitions, "set_progress", recorded)
    started_at = cluster.events.count()
    writer.start()
    try:
        Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.STARTING)  # as the web queues it
        restarted = lifecycle.perform_action(Cluster.objects.get(pk=cluster.pk), "restart")
        acked_during = len(writer.acked)
        deadline = time.monotonic() + 30
        while len(writer.acked) < acked_during + 50 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        writer.finish()
    monkeypatch.undo()

    assert restarted.status == ClusterStatus.ONLINE, restarted.error_message
    assert _primary(restarted) == "member-2"
    statuses = ha.read_statuses(restarted)
    assert [s.name for s in statuses if s.is_primary] == ["member-2"], statuses
    after = {m.name: postgres.postmaster_pid(m.pgdata) for m in restarted.members.all()}
    assert all(after[name] not in (None, pid) for name, pid in before.items()), (before, after)
    # The pools were paused while the primary restarted: their clients waited, nothing failed.
    assert writer.failed == [], f"transactions failed during the restart: {writer.failed[:5]}"
    with psycopg.connect(**writer.params) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM acked")}
        conn.execute("DROP TABLE acked")
    lost = [n for n, _t in writer.acked if n not in present]
    assert not lost, f"{len(lost)} acknowledged commits lost"
    assert len(writer.acked) > acked_during, "the writer went on after the restart"
    # What the page and the events said.
    assert steps == [
        "Restarting member by member, the standbys first; the primary stays where it is",
        "Restarting the standbys, one at a time",
        "Restarting the primary in place; the pools' clients wait meanwhile",
    ]
    events = list(restarted.events.order_by("created_at", "id")[started_at:])
    assert [e.kind for e in events] == ["restarted"], [(e.kind, e.message) for e in events]
    assert events[0].message == (
        "Cluster restarted member by member, the standbys first; member-2 is still the primary."
    )


def test_a_cluster_missing_a_member_starts_it_then_restarts_keeping_the_primary(ha_cluster: Cluster) -> None:
    cluster = Cluster.objects.get(pk=ha_cluster.pk)
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    primary = _primary(cluster)
    standby = next(m for m in cluster.members.all() if m.name != primary)
    patroni.stop_member(ha.member_config_path(cluster, standby))
    assert postgres.postmaster_pid(standby.pgdata) is None
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.DEGRADED)
    started_at = cluster.events.count()
    restarted = lifecycle.perform_action(Cluster.objects.get(pk=cluster.pk), "restart")
    assert restarted.status == ClusterStatus.ONLINE, restarted.error_message
    assert ha.wait_healthy(restarted, TIMEOUT), ha.read_statuses(restarted)
    assert postgres.postmaster_pid(standby.pgdata) is not None
    assert _primary(restarted) == primary
    events = list(restarted.events.order_by("created_at", "id").values_list("kind", "message")[started_at:])
    assert events == [
        ("restarting", "The members are not all running: the missing ones start first, then each restarts."),
        (
            "restarted",
            f"Cluster restarted member by member, the standbys first; {primary} is still the primary.",
        ),
    ]
