"""A change reaches the member on another node or nowhere (issue 28): with two node agents
running, a two-member cluster's standby on node B takes a configuration change, a new role's
pg_ident.conf and a resize's plan through B's agent; B's reconciler rewrites Patroni's files an
earlier panel left holding the superuser's password; a switchover to B's member and back keeps a
pool client's connection and every commit; with B's agent stopped the next change and a resize are
refused before anything changes on A.

It borrows the pair of agents of ``two_nodes`` (tests/fixtures/agent_pair.py) with the other
two-node journeys (conftest.py: TWO_NODE_JOURNEYS), after tests/test_remote_members_takeover.py
(a standby run, supervised and taking over on node B).
"""

from __future__ import annotations

import io
import json
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from panel.clusters import services
from panel.clusters.engine import isolation, postgres
from panel.clusters.models import Cluster, ClusterMember, ClusterStatus, Node, credentials
from panel.clusters.services import config, resize, roles
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha, ha_files, switchover
from panel.clusters.tests.conftest import connect_as_client
from panel.core import runas
from panel.core.errors import ServiceError
from panel.core.polling import wait_for
from panel.pools import services as pools
from tests.fixtures.agent_pair import Agent
from tests.fixtures.remote_members import agent_logs, cluster_status, may_take_over, round_on

pytestmark = pytest.mark.integration


def _as_an_earlier_panel(cluster: Cluster, config: Path) -> None:
    """A member's Patroni files as a panel before issue 37 wrote them: the superuser with its
    password for every login, and in the passfile; its Patroni reads them again."""
    user = isolation.os_user(cluster)
    auth = {"username": settings.PANEL_SUPERUSER, "password": credentials.superuser_password(cluster)}
    written = json.loads(config.read_text())
    written["postgresql"]["authentication"] = {"superuser": auth, "replication": auth, "rewind": auth}
    runas.write_private_file(config, json.dumps(written, indent=2) + "\n", owner=user)
    line = f"*:*:*:{settings.PANEL_SUPERUSER}:{credentials.superuser_password(cluster)}\n"
    runas.write_private_file(config.with_suffix(".pgpass"), line, owner=user)
    with override_settings(PANEL_PROCESS_ROLE="all"):  # the test harness signals it
        patroni.reload_member(config)


def _holds_password(cluster: Cluster, config: Path) -> bool:
    texts = [config.read_text(), config.with_suffix(".pgpass").read_text()]
    return any(credentials.superuser_password(cluster) in text for text in texts)


def _streaming_as_member(socket_dir: Path, port: int) -> bool:
    """Whether the member listening on ``socket_dir`` (its node's) streams as the members' role,
    asked over its socket by peer authentication (the panel's OS user maps to its superuser)."""
    with psycopg.connect(
        host=str(socket_dir), port=port, user=settings.PANEL_SUPERUSER, dbname="postgres"
    ) as conn:
        row = conn.execute("SELECT status, conninfo FROM pg_catalog.pg_stat_wal_receiver").fetchone()
    return bool(row and row[0] == "streaming" and f"user={settings.PANEL_MEMBER_ROLE} " in row[1])


def _switchover(cluster: Cluster, to: str, wait_until: Callable[..., object]) -> str:
    """switchover.switchover, asked again when Patroni refused it (nothing changed) because its sync
    key did not name ``to`` yet: under load the key lags the listing the panel checked."""
    candidate = cluster.members.get(name=to)
    for _attempt in range(3):
        try:
            return switchover.switchover(cluster, to)
        except ServiceError as exc:
            if exc.code != "cluster.switchover_failed" or "sync_standby" not in exc.message:
                raise
        wait_until(lambda: may_take_over(cluster, candidate), timeout=90, message=f"{to} synchronous again")
    return switchover.switchover(cluster, to)


def _synchronous(socket_dir: Path, port: int, standby: ClusterMember) -> bool:
    """Whether the primary listening on ``socket_dir`` (its node's) has ``standby`` streaming as
    its synchronous standby now (what its Patroni reads at each loop to keep the /sync key)."""
    with psycopg.connect(
        host=str(socket_dir), port=port, user=settings.PANEL_SUPERUSER, dbname="postgres"
    ) as conn:
        row = conn.execute(
            "SELECT state, sync_state FROM pg_catalog.pg_stat_replication WHERE application_name = %s",
            [standby.name],
        ).fetchone()
    return row == ("streaming", "sync")


def _work_mem(cluster: Cluster, host: str, port: int) -> str:
    """``SHOW work_mem`` on one member, over TCP as a client (and the panel) connects."""
    with connect_as_client(cluster, host=host, port=port, connect_timeout=5) as conn:
        row = conn.execute("SHOW work_mem").fetchone()
    return str(row[0]) if row else ""


def _work_mem_or_none(cluster: Cluster, member: ClusterMember) -> str | None:
    try:
        return _work_mem(cluster, member.host, member.port)
    except psycopg.Error:
        return None


def _reload_b(cluster: Cluster, member: ClusterMember, auth: tuple[str, str] | None = None) -> int:
    """Patroni's ``POST /reload`` on one member (harmless): 401 once it asks for credentials."""
    return patroni.rest("POST", member.rest_port, "/reload", {}, host=member.host, auth=auth)[0]


def _show(cluster: Cluster, member: ClusterMember, setting: str) -> str:
    """``SHOW`` of one setting on one member, over TCP as a client connects."""
    with connect_as_client(cluster, host=member.host, port=member.port, connect_timeout=5) as conn:
        row = conn.execute(f"SHOW {setting}").fetchone()
    return str(row[0]) if row else ""


def _pids(owner: User) -> dict[str, int | None]:
    out = io.StringIO()
    call_command("cluster", "members", "spreadconf", "--json", "--owner", owner.username, stdout=out)
    return {row["name"]: row["pid"] for row in json.loads(out.getvalue())}


def test_a_configuration_change_reaches_the_member_on_another_node_or_nowhere(
    two_nodes: tuple[Agent, Agent], owner: User, wait_until: Callable[..., object]
) -> None:
    a, b = two_nodes
    wait_until(lambda: all(Node.objects.get(pk=x.node.pk).is_alive for x in (a, b)), timeout=60)
    cluster = services.create_cluster(
        owner, name="spreadconf", plan_slug="db-s-1vcpu-2gb", num_nodes=2, node=a.node.name
    )
    primary, standby = cluster.members.order_by("name")
    wait_until(lambda: cluster_status(cluster) != ClusterStatus.CREATING, timeout=240, message="provisioning")
    if cluster.status != ClusterStatus.ONLINE:
        pytest.fail(f"{cluster.error_message}\n{agent_logs(a, b)}", pytrace=False)
    assert ha.wait_healthy(cluster, 90)
    assert _work_mem(cluster, standby.host, standby.port) == "4MB"
    # B's member's REST API at its node's address refuses a change without the cluster's
    # credentials (tests/security/test_patroni_rest.py replays the whole attack).
    answer = patroni.rest("PATCH", standby.rest_port, "/config", {"loop_wait": 5}, host=standby.host)
    assert answer[0] == 401, answer

    # B's member as if its Patroni ran from before the REST credentials (its configuration without
    # them, reloaded): the next configuration push through B's agent gives them back.
    on_b_config = b.data_dir / ha_files.member_config_path(cluster, standby).relative_to(
        cluster.data_root.parent.parent
    )
    older = json.loads(on_b_config.read_text())
    del older["restapi"]["authentication"]
    on_b_config.write_text(json.dumps(older))
    assert _reload_b(cluster, standby, auth=credentials.rest_credentials(cluster)) in (200, 202)
    assert wait_for(lambda: _reload_b(cluster, standby) in (200, 202), 20, interval=0.5)

    # The service the configuration form calls (sent to A's agent: this process is the web).
    config.update_config(cluster, {"work_mem": 64})
    assert wait_for(lambda: _reload_b(cluster, standby) == 401, 20, interval=0.5)
    assert _work_mem(cluster, standby.host, standby.port) == "64MB"  # B's member, reloaded by B's agent
    assert _work_mem(cluster, primary.host, primary.port) == "64MB"

    # A new role: pg_ident.conf as node A wrote it (PgBouncer's peer map) reaches B's member too.
    ident_on_b = b.data_dir / cluster.ident_path.relative_to(cluster.data_root.parent.parent)
    assert "reporter" not in ident_on_b.read_text()
    roles.add_user(cluster, "reporter")
    assert "reporter" in ident_on_b.read_text()
    assert not cluster.events.filter(kind="auth-error").exists()

    # B's member from before issue 37 (Patroni's files hold the superuser's password): B's own
    # reconciler writes them anew without it, with the member CA's certificate (0600, the
    # cluster's user), and its Patroni streams as the members' role again.
    # A round leaves members alone while one's Patroni is not seen running and streaming (right
    # after the reload its standby may be reconnecting): rounds until one has rewritten them.
    _as_an_earlier_panel(cluster, on_b_config)
    assert credentials.superuser_password(cluster) in on_b_config.read_text()
    wait_until(
        lambda: round_on(b, wait_until) and not _holds_password(cluster, on_b_config),
        timeout=180,
        message="B's reconciler rewrites its files",
    )
    # Then a round has nothing to say of the cluster: its files are current. (Not always the next
    # one: until B's Patroni reads its new file at its next loop, it may write its passfile from
    # the old one again, and a round rewrites it again.)
    wait_until(
        lambda: f"'{cluster.name}: " not in round_on(b, wait_until),
        timeout=180,
        message="a round of B's with nothing to do",
    )
    replication = json.loads(on_b_config.read_text())["postgresql"]["authentication"]["replication"]
    assert replication["username"] == settings.PANEL_MEMBER_ROLE
    key = Path(replication["sslkey"])
    assert key.is_relative_to(b.data_dir) and stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.stat().st_uid == isolation.os_user(cluster).uid
    socket_on_b = b.data_dir / cluster.socket_dir.relative_to(cluster.data_root.parent.parent)
    wait_until(
        lambda: _streaming_as_member(socket_on_b, standby.port),
        timeout=90,
        message="B streams as the members' role",
    )
    # Synchronous again after its reload, as the primary itself and B's own Patroni say (the
    # listing alone may still show the /sync key from before B's walreceiver reconnected, which
    # the primary's Patroni drops at its next loop): a switchover may go to it.
    socket_on_a = a.data_dir / cluster.socket_dir.relative_to(cluster.data_root.parent.parent)
    wait_until(
        lambda: _synchronous(socket_on_a, primary.port, standby) and may_take_over(cluster, standby),
        timeout=90,
        message="B the synchronous standby again",
    )
    assert ha.wait_healthy(cluster, 90)

    # A switchover to B's member and back while a client of the transaction pool writes on one
    # connection: B's before_stop script holds its primary's stop until the pools are paused (the
    # handover files through B's agent), so the client keeps its connection and every commit.
    pools.create_pool(cluster, "conf", "defaultdb", None, "transaction", 3)
    with connect_as_client(cluster) as conn:
        conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
    acked, failed, stop = [], [], threading.Event()
    with connect_as_client(
        cluster, port=cluster.pooler_port, dbname="conf", autocommit=True, prepare_threshold=None
    ) as client:  # no server-side prepared statements through a transaction pool

        def writer() -> None:
            for value in range(1, 1_000_000):
                if stop.is_set():
                    return
                try:
                    client.execute("INSERT INTO acked VALUES (%s)", [value])
                    acked.append(value)
                except psycopg.Error as exc:
                    failed.append(f"{value}: {exc}")
                    if client.closed:
                        return

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            assert _switchover(cluster, "member-2", wait_until) == "member-2"
            assert ha.wait_healthy(cluster, 90)  # member-1 streams again: it may take over
            assert _switchover(cluster, "member-1", wait_until) == "member-1"
        finally:
            stop.set()
            thread.join(timeout=30)
        assert not client.closed and failed == [], failed
        assert client.execute("SELECT current_setting('port')::int").fetchone() == (primary.port,)
        found = {row[0] for row in client.execute("SELECT id FROM acked").fetchall()}
    assert len(acked) > 10 and set(acked) <= found
    switched = [line for line in a.log.read_text().splitlines() if f"switchover of {cluster.pk}" in line]
    assert len(switched) == 2 and all("stopping" in line for line in switched), switched

    assert ha.wait_healthy(cluster, 90)  # member-2 restarted as a standby

    # The member's postmaster pid in ``members --json`` is what B's agent reads on B.
    assert _pids(owner)["member-2"] == postgres.postmaster_pid(Path(standby.data_dir)) is not None

    # A resize: the new plan's panel.conf reaches B's member through B's agent before the rolling
    # restart (a postmaster restart is what takes shared_buffers), so B's member runs on it too.
    small = _show(cluster, standby, "shared_buffers")
    started = time.monotonic()
    resize.resize_cluster(Cluster.objects.get(pk=cluster.pk), "db-s-2vcpu-4gb")
    wait_until(lambda: cluster_status(cluster) != ClusterStatus.RESIZING, timeout=300, message="the resize")
    print(f"resize of the spread cluster (push, rolling restart): {time.monotonic() - started:.1f} s")
    assert (cluster.status, cluster.plan_slug, cluster.error_message) == ("online", "db-s-2vcpu-4gb", "")
    large = _show(cluster, primary, "shared_buffers")
    assert large != small and _show(cluster, standby, "shared_buffers") == large
    assert ha.wait_healthy(cluster, 90)

    # B's agent stopped: the next change is refused, and nothing changed on A (row, file, server).
    settings_conf = a.data_dir / cluster.pgdata.relative_to(cluster.data_root.parent.parent) / "settings.conf"
    before = settings_conf.read_text()
    with override_settings(PANEL_PROCESS_ROLE="all"):  # the test harness, not the web, stops it
        b.stop()
    # Once B is seen silent (by this process and A's agent alike) the push to it is refused at
    # once; a call to an agent that stopped only now waits out its timeout (tests/test_node_agent.py).
    wait_until(lambda: not Node.objects.get(pk=b.node.pk).is_alive, timeout=30, message="B silent")
    with pytest.raises(ServiceError) as refused:
        config.update_config(cluster, {"work_mem": 32})
    assert refused.value.code == "config.not_applied"
    assert b.node.name in refused.value.message
    cluster.refresh_from_db()
    assert cluster.config["work_mem"] == 64
    assert settings_conf.read_text() == before
    # (Retried: at load averages near 20 a member's TLS login took longer than the 5 s timeout.)
    for member in (primary, standby):
        assert wait_for(lambda m=member: _work_mem_or_none(cluster, m) == "64MB", 60, interval=1), (
            member.name,
            ha.read_statuses(cluster),
        )
    # A resize too: refused before anything changes.
    with pytest.raises(ServiceError) as silent:
        resize.resize_cluster(Cluster.objects.get(pk=cluster.pk), "db-s-1vcpu-2gb")
    assert silent.value.code == "resize.member_silent" and b.node.name in silent.value.message
    assert cluster_status(cluster) == ClusterStatus.ONLINE
    assert Cluster.objects.get(pk=cluster.pk).plan_slug == "db-s-2vcpu-4gb"
    assert _show(cluster, standby, "shared_buffers") == large
    # With B's agent gone the pid is unknown, not a number read from A's disk (B's member runs on).
    assert postgres.postmaster_pid(Path(standby.data_dir)) is not None
    wait_until(lambda: Node.objects.get(pk=a.node.pk).is_alive, timeout=30, message="A's heartbeat")
    assert _pids(owner)["member-2"] is None
