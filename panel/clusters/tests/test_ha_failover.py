"""Integration: a three-member cluster (Patroni, etcd, HAProxy, PgBouncer repointed) survives
the loss of its primary's postmaster, and of a member's Patroni and postmaster together, while
a writer commits through a transaction pool: writes resume, no acknowledged commit is lost, and
the old primary comes back as a standby (pg_rewind)."""

from __future__ import annotations

import io
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from django.core.management import call_command
from django.test import Client

from panel.api import services as api_services
from panel.api.models import Scope
from panel.clusters import services
from panel.clusters.engine import cgroups, isolation, postgres
from panel.clusters.models import Cluster, ClusterMember, MemberRole
from panel.clusters.services import reconciler
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha, switchover
from panel.clusters.tests.test_ha_rolling import Writer, tls_params, writable_ha_cluster
from panel.core.errors import ServiceError
from tests.fixtures.processes import start_node_agent

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

RECOVERY_TIMEOUT = 90


@pytest.fixture(scope="module")
def ha_cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """One three-member db-s-1vcpu-2gb cluster for the module, with a transaction pool."""
    with writable_ha_cluster(django_db_blocker, "ha-owner", "db-ha") as cluster:
        yield cluster


def _params(cluster: Cluster, dbname: str = "defaultdb", *, port: int | None = None) -> dict[str, object]:
    """The admin user over TCP and TLS: through HAProxy (the cluster's port) or a pool."""
    return tls_params(cluster, dbname, port or cluster.port)


def _connect(cluster: Cluster, dbname: str = "defaultdb", *, port: int | None = None) -> psycopg.Connection:
    return psycopg.connect(**_params(cluster, dbname, port=port))


def _primary(cluster: Cluster) -> ClusterMember:
    ha.refresh_members(cluster)
    return cluster.members.get(role=MemberRole.PRIMARY)


def _survive(cluster: Cluster, kill: object) -> tuple[ClusterMember, float]:
    """Run the writer, ``kill(primary)``, wait for writes to succeed again; check the commits."""
    assert ha.wait_healthy(cluster, RECOVERY_TIMEOUT)
    old = _primary(cluster)
    writer = Writer(_params(cluster, "writes", port=cluster.pooler_port))
    writer.start()
    assert len(writer.acked) >= 50, f"the writer did not get going: {writer.failed[:5]}"
    killed_at = time.monotonic()
    kill(old)  # type: ignore[operator]
    # Backends of a killed postmaster may still commit for a moment: wait for another primary,
    # then for commits through the pool after it took over.
    deadline = killed_at + RECOVERY_TIMEOUT
    while time.monotonic() < deadline:
        statuses = ha.read_statuses(cluster)
        if any(s.is_primary and s.state == "running" and s.name != old.name for s in statuses):
            break
        time.sleep(0.2)
    after_takeover = len(writer.acked)
    while len(writer.acked) < after_takeover + 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    writer.finish()
    assert len(writer.acked) >= after_takeover + 50, "writes did not succeed again"
    with psycopg.connect(**writer.params) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM acked")}
    lost = [n for n, _t in writer.acked if n not in present]
    assert not lost, f"{len(lost)} acknowledged commits lost: {lost[:10]}"
    new = _primary(cluster)
    assert new.name != old.name
    # The old primary comes back as a standby of the new one (rewound), its Patroni supervised.
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while not ha.wait_healthy(cluster, 2) and time.monotonic() < deadline:
        reconciler.reconcile()
    old.refresh_from_db()
    assert old.role == MemberRole.STANDBY and old.state == "streaming", (old.role, old.state)
    with psycopg.connect(**writer.params) as conn:
        conn.execute("DELETE FROM acked")
    return new, time.monotonic() - killed_at


def test_a_three_member_cluster_is_up_with_one_primary_and_two_streaming_standbys(ha_cluster):
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT)
    roles = sorted(ha_cluster.members.values_list("role", flat=True))
    assert roles == ["primary", "standby", "standby"]
    with _connect(ha_cluster) as conn:  # HAProxy on the cluster's port reaches the primary
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        assert conn.execute("SHOW data_checksums").fetchone() == ("on",)
        # The plan's connection limit, though initdb's was 100 (a restart applied it).
        assert conn.execute("SHOW max_connections").fetchone() == ("50",)
    assert ha_cluster.events.filter(kind="members").exists()


def test_members_lists_roles_ports_and_postmaster_pids_as_json(ha_cluster):
    out = io.StringIO()
    call_command("cluster", "members", "db-ha", "--json", "--owner", "ha-owner", stdout=out)
    rows = json.loads(out.getvalue())
    assert [r["name"] for r in rows] == ["member-1", "member-2", "member-3"]
    assert set(rows[0]) == {"name", "role", "node", "port", "pid", "state", "lag_bytes", "timeline"}
    assert sorted(r["role"] for r in rows) == ["primary", "standby", "standby"]
    for row in rows:
        member = ha_cluster.members.get(name=row["name"])
        assert row["port"] == member.port and row["node"] == "local"
        assert row["pid"] == postgres.postmaster_pid(member.pgdata)


@pytest.mark.skipif(cgroups.version() is None, reason="cgroups are written by root on a mounted hierarchy")
def test_each_member_runs_in_a_cgroup_of_its_own_with_the_plans_limits(ha_cluster):
    """The plan applies to each member: its Patroni and postmaster in a group of their own with
    the plan's memory limit and CPU quota (db-s-1vcpu-2gb: 2 GiB, one core), not one group
    shared by the three."""
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT)
    controller = "memory" if cgroups.version() == 1 else ""
    groups = set()
    for member in ha_cluster.members.all():
        name = isolation.member_cgroup_name(ha_cluster, member.name)
        postmaster = postgres.postmaster_pid(member.pgdata)
        patroni_pid = patroni.member_pid(ha.member_config_path(ha_cluster, member))
        assert postmaster is not None and patroni_pid is not None
        for pid in (postmaster, patroni_pid):
            assert cgroups.group_of(pid, controller).endswith(f"/{cgroups.PARENT}/{name}"), member.name
        group = cgroups.find(name)
        assert group is not None
        assert cgroups.memory_limit(group) == 2 * 1024**3
        assert cgroups.cpu_quota(group) == 1.0
        groups.add(cgroups.group_of(postmaster, controller))
    assert len(groups) == 3


def test_switchover_refuses_missing_primary_and_lagging_members_and_one_member_clusters(ha_cluster):
    primary = _primary(ha_cluster).name
    for to, code in (("member-9", "unknown_member"), (primary, "already_primary")):
        with pytest.raises(ServiceError) as refused:
            switchover.switchover(ha_cluster, to)
        assert refused.value.code == f"cluster.switchover_{code}" and refused.value.field == "to"
    single = services.create_cluster(
        ha_cluster.owner, name="db-single", plan_slug="db-s-1vcpu-2gb", enqueue=False
    )
    with pytest.raises(ServiceError) as refused:
        switchover.switchover(single, None)
    assert refused.value.code == "cluster.switchover_no_standby"
    single.delete()
    # A standby that stopped replaying (its startup process suspended: Patroni would resume a
    # replay paused with pg_wal_replay_pause) falls behind: it may not take over.
    statuses = ha.read_statuses(ha_cluster)
    lagging = next(s for s in statuses if not s.is_primary and not s.sync)
    postmaster = psutil.Process(ha_cluster.members.get(name=lagging.name).pid)
    startup = next(p for p in postmaster.children() if "startup" in " ".join(p.cmdline()))
    startup.suspend()
    try:
        with _connect(ha_cluster) as conn:
            conn.execute("CREATE TABLE filler AS SELECT repeat('x', 1000) AS t FROM generate_series(1, 5000)")
            conn.execute("DROP TABLE filler")
        with pytest.raises(ServiceError) as refused:
            switchover.switchover(ha_cluster, lagging.name)
        assert refused.value.code == "cluster.switchover_member_lagging", refused.value.message
        assert int(refused.value.params["lag"]) > 1024 * 1024, refused.value.params
        assert _primary(ha_cluster).name == primary
    finally:
        startup.resume()


def test_a_caught_up_asynchronous_standby_is_refused_for_what_it_is(ha_cluster):
    """Three members keep one synchronous standby and one asynchronous: a switchover to the
    asynchronous one, caught up, is refused saying so and naming the synchronous one (it was
    refused as "streaming and 0 bytes behind … wait until it has caught up", which no wait ends)."""
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT), ha.read_statuses(ha_cluster)
    primary = _primary(ha_cluster).name
    statuses = ha.read_statuses(ha_cluster)
    sync = next(s.name for s in statuses if s.sync)
    other = next(s.name for s in statuses if not s.is_primary and not s.sync)
    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while True:
        with pytest.raises(ServiceError) as refused:
            switchover.switchover(ha_cluster, other)
        if refused.value.code != "cluster.switchover_member_lagging" or time.monotonic() > deadline:
            break
        time.sleep(0.5)  # it still replays what the test before held back (rightly refused so)
    assert refused.value.code == "cluster.switchover_member_not_sync", refused.value.message
    assert refused.value.params == {"member": other, "sync": sync}
    assert _primary(ha_cluster).name == primary


def test_the_overview_refuses_a_switchover_to_a_missing_member_next_to_the_field(ha_cluster, other_client):
    browser = Client()
    browser.force_login(ha_cluster.owner)
    url = f"/clusters/{ha_cluster.pk}/members/switchover/"
    response = browser.post(url, {"to": "member-9"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "has no member “member-9”" in page and "is-invalid" in page
    assert 'data-role="primary"' in page
    # Another account's user gets a 404 for the card and the action alike.
    assert other_client.get(f"/clusters/{ha_cluster.pk}/members/").status_code == 404
    assert other_client.post(url, {"to": "member-2"}).status_code == 404


def test_a_switchover_holds_pool_clients_and_is_an_event_with_its_duration(ha_cluster):
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT)
    target = next(s for s in ha.read_statuses(ha_cluster) if s.sync)
    old = _primary(ha_cluster)
    old_log = ha.member_log_path(ha_cluster, old)
    log_before = old_log.read_text().count("before_stop script")
    writer = Writer(_params(ha_cluster, "writes", port=ha_cluster.pooler_port))
    deadline = writer.start()
    try:
        assert switchover.switchover(ha_cluster, None) == target.name
        # The pools were paused: the writer's transactions waited instead of failing.
        after = len(writer.acked)
        while len(writer.acked) < after + 50 and time.monotonic() < deadline + RECOVERY_TIMEOUT:
            time.sleep(0.1)
    finally:
        writer.finish()
    assert writer.failed == [], f"transactions failed during the switchover: {writer.failed}"
    with psycopg.connect(**writer.params) as conn:
        present = {row[0] for row in conn.execute("SELECT id FROM acked")}
        conn.execute("DELETE FROM acked")
    assert {n for n, _t in writer.acked} <= present
    event = ha_cluster.events.filter(kind="switchover").first()
    assert event is not None and target.name in event.message and "writes resumed within" in event.message
    # The old primary's stop waited for the pools (Patroni ran the before_stop script), the
    # handover left no file behind, and the third member follows the leader again (no tag).
    assert old_log.read_text().count("before_stop script") > log_before
    assert not list(Path(ha_cluster.socket_dir).glob(".switchover-*"))
    for member in ha_cluster.members.all():
        tags = json.loads(ha.member_config_path(ha_cluster, member).read_text())["tags"]
        assert "replicatefrom" not in tags, tags


def test_a_primary_postmaster_crash_fails_over_without_losing_commits(ha_cluster):
    new, _took = _survive(ha_cluster, lambda member: patroni.kill_postmaster(member.pid))
    assert ha_cluster.events.filter(kind="failover").exists()


def test_losing_a_members_patroni_and_postmaster_fails_over_too(ha_cluster):
    def node_loss(member: ClusterMember) -> None:
        patroni.kill_member(ha.member_config_path(ha_cluster, member), member.pid)

    _survive(ha_cluster, node_loss)


@pytest.fixture
def web_with_agent(redis_server: str, settings: object) -> Iterator[None]:
    """This process acts as the web (role "web"); a real Celery worker is this node's agent."""
    log = Path(settings.PANEL_DATA_DIR) / "ha-agent.log"  # type: ignore[attr-defined]
    # An agent that beats: the test waits for the members and switches over for longer than
    # PANEL_NODE_DEAD_AFTER on a loaded machine, and a heartbeat written once would go stale.
    proc = start_node_agent(redis_server, log)
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    try:
        yield
    finally:
        settings.PANEL_PROCESS_ROLE = "all"  # type: ignore[attr-defined]
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


# Last: the agent writes to the test database, so this test commits (and the rows are flushed
# after it; the module's fixture then removes the cluster's processes and files without them).
@pytest.mark.django_db(transaction=True)
def test_switchover_from_the_api_through_the_agent_keeps_pool_clients(ha_cluster, web_with_agent):
    assert ha.wait_healthy(ha_cluster, RECOVERY_TIMEOUT)
    statuses = ha.read_statuses(ha_cluster)
    old = next(s for s in statuses if s.is_primary)
    target = next(s for s in statuses if s.sync)
    token = api_services.create_token(ha_cluster.owner, "test", [Scope.READ, Scope.UPDATE])[1]
    with psycopg.connect(**_params(ha_cluster, "writes", port=ha_cluster.pooler_port)) as client:
        client.execute("SELECT 1")
        response = Client().post(
            f"/v2/databases/{ha_cluster.pk}/switchover",
            {"to": target.name},
            content_type="application/json",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.content
        assert response.json() == {"primary": target.name}
        # The same client connection goes on, now on the new primary (the pools were paused
        # while the primary changed, and resumed once PgBouncer was repointed).
        for _attempt in range(50):
            try:
                if client.execute("SELECT pg_is_in_recovery()").fetchone() == (False,):
                    break
            except psycopg.OperationalError:
                pass
            time.sleep(0.2)
        client.execute("INSERT INTO acked VALUES (-1)")
        client.execute("DELETE FROM acked")
    assert any(s.name == old.name and not s.is_primary for s in ha.read_statuses(ha_cluster))
    # The Overview's card (its list read by the agent) shows the new primary.
    browser = Client()
    browser.force_login(ha_cluster.owner)
    page = browser.get(f"/clusters/{ha_cluster.pk}/members/").content.decode()
    assert f'data-member="{target.name}" data-role="primary"' in page
