"""Anti-affinity for real (issue 28): a two-member cluster created while two node agents run
(scripts/node_agent.py, each with its own data directory and ports) has its standby on the other
node, built and run by that node's agent (data directory and Patroni's files under that node's
data directory, its own cgroup with the plan's limits there) and supervised by that node's
reconciler; ``members --json`` names both nodes; when the primary's postmaster is SIGKILLed the member on node B takes over and writes
through the cluster's transaction pool (PgBouncer on node A, now over TCP) work again.
"""

from __future__ import annotations

import io
import json
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings

from panel.clusters import services
from panel.clusters.engine import cgroups, isolation, postgres
from panel.clusters.models import Cluster, ClusterEntry, ClusterMember, ClusterStatus, Node, credentials
from panel.clusters.services import config, firewall, resize, roles
from panel.clusters.standbys.engine import haproxy, patroni
from panel.clusters.standbys.services import ha, ha_files, switchover
from panel.clusters.tests.conftest import connect_as_client
from panel.core import runas, taskqueue
from panel.core.errors import ServiceError
from panel.core.polling import wait_for
from panel.pools import services as pools
from tests.fixtures.agent_pair import Agent

pytestmark = pytest.mark.integration


def _status(cluster: Cluster) -> str:
    cluster.refresh_from_db()
    return cluster.status


def _write(cluster: Cluster, value: int, **where: object) -> int | None:
    """One row inserted through the pool (``where``: another node's ``host`` and ``port``); the
    server port that took it, or None when refused."""
    where = {"port": cluster.pooler_port, **where}
    try:
        with connect_as_client(cluster, dbname="writes", connect_timeout=3, **where) as conn:
            conn.execute("INSERT INTO acked VALUES (%s)", [value])
            row = conn.execute("SELECT current_setting('port')::int").fetchone()
            return int(row[0]) if row else -1
    except psycopg.Error:
        return None


def _logs(*agents: Agent) -> str:
    """The ends of the agents' Patroni and etcd logs (for a failure's message)."""
    found = []
    for agent in agents:
        logs = ("node-agent.log", "patroni-*.log", "etcd.log", "postgresql*.json", "postgresql.log")
        for path in [found for pattern in logs for found in agent.data_dir.rglob(pattern)]:
            lines = path.read_text(errors="replace").splitlines()
            if path.name == "node-agent.log":  # the agent's failures and what follows each
                at = [i for i, line in enumerate(lines) if "ERROR/" in line or "WARNING/" in line]
                worst = [line for i in at[:8] for line in lines[i : i + 12]]
            else:
                worst = [line for line in lines if "ERROR" in line or "FATAL" in line or "error" in line][:10]
            found.append(f"--- {path}\n" + "\n".join([*worst, *lines[-6:]]))
    return "\n".join(found)


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


RECONCILE = "panel.clusters.tasks.reconcile"


def _round_on(agent: Agent, wait_until: Callable[..., object]) -> str:
    """One reconciler round on ``agent``'s node, awaited: what its log says the round returned."""
    before = agent.served(RECONCILE)
    taskqueue.send(RECONCILE, [], queue=agent.node.tasks_queue)  # (results not kept)
    wait_until(lambda: agent.served(RECONCILE) > before, timeout=180, message=f"a round on {agent.node.name}")
    rounds = [line for line in agent.log.read_text(errors="replace").splitlines() if f"{RECONCILE}[" in line]
    return next(line for line in reversed(rounds) if "succeeded" in line)


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
        wait_until(lambda: _may_take_over(cluster, candidate), timeout=90, message=f"{to} synchronous again")
    return switchover.switchover(cluster, to)


def _may_take_over(cluster: Cluster, standby: ClusterMember) -> bool:
    """Whether Patroni would fail over to ``standby`` if the primary crashed now: its own Patroni
    answers at once (the primary's asks it with a 2 s timeout at the crash) that its server runs
    and streams as the synchronous standby, and the members' listing shows it with no lag. (The
    listing alone is not enough: the consensus store keeps a killed Patroni's last word until its
    key expires, while the new Patroni may still be starting.)"""
    status, text = patroni.rest("GET", standby.rest_port, "/patroni", timeout=2, host=standby.host)
    if status != 200:
        return False
    own = json.loads(text)
    if (own.get("state"), own.get("replication_state"), own.get("sync_standby")) != (
        "running",
        "streaming",
        True,
    ):
        return False
    statuses = {s.name: s for s in ha.read_statuses(cluster)}
    listed = statuses.get(standby.name)
    running = [s for s in statuses.values() if s.is_primary and s.state == "running"]
    return bool(listed and listed.sync and listed.state == "streaming" and listed.lag_bytes == 0 and running)


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


def test_a_standby_on_another_node_is_run_there_and_takes_over(
    two_nodes: tuple[Agent, Agent], owner: User, wait_until: Callable[..., object]
) -> None:
    a, b = two_nodes
    wait_until(lambda: all(Node.objects.get(pk=x.node.pk).is_alive for x in (a, b)), timeout=60)
    cluster = services.create_cluster(
        owner, name="spread", plan_slug="db-s-1vcpu-2gb", num_nodes=2, node=a.node.name
    )
    primary, standby = cluster.members.order_by("name")
    assert (primary.node.name, standby.node.name) == (a.node.name, b.node.name)
    wait_until(lambda: _status(cluster) != ClusterStatus.CREATING, timeout=240, message="provisioning")
    if cluster.status != ClusterStatus.ONLINE:
        pytest.fail(f"{cluster.error_message}\n{_logs(a, b)}", pytrace=False)
    assert ha.wait_healthy(cluster, 90)

    # The standby is node B's: its data directory, Patroni's configuration and log under B's data
    # directory, started by B's agent (which answered the call), in its own cgroup there.
    data_dir = Path(standby.data_dir)
    assert data_dir.is_relative_to(b.data_dir) and (data_dir / "PG_VERSION").exists()
    config = ha_files.member_config_path(cluster, standby)  # this process's data directory…
    on_b = b.data_dir / config.relative_to(cluster.data_root.parent.parent)  # …as on node B
    assert on_b.exists() and not config.exists()
    patroni_pid = patroni.member_pid(on_b)
    postmaster = postgres.postmaster_pid(data_dir)
    assert patroni_pid is not None and postmaster is not None
    assert Path(psutil.Process(postmaster).cwd()) == data_dir
    assert b.served("panel.core.agent.call") >= 1
    if cgroups.version() is not None:
        controller = "memory" if cgroups.version() == 1 else ""
        group = cgroups.group_of(postmaster, controller)
        assert group.endswith(f"/{cgroups.PARENT}/{cluster.pk}-member-2")
        assert cgroups.group_of(patroni_pid, controller) == group

    out = io.StringIO()
    call_command("cluster", "members", "spread", "--json", "--owner", owner.username, stdout=out)
    rows = {row["name"]: row for row in json.loads(out.getvalue())}
    assert (rows["member-1"]["node"], rows["member-2"]["node"]) == (a.node.name, b.node.name)
    assert rows["member-1"]["role"] == "primary" and rows["member-2"]["role"] == "standby"
    assert rows["member-2"]["pid"] == postmaster

    # B's reconciler supervises B's member: its Patroni killed, B's reconcile starts it again, and
    # that round does nothing else (its member's files are current: no rewrite, reload or signal).
    with override_settings(PANEL_PROCESS_ROLE="all"):  # the test harness, not the web, kills it
        os.kill(patroni_pid, signal.SIGKILL)
    wait_until(lambda: patroni.member_pid(on_b) is None, timeout=10, message="Patroni on B gone")
    done = _round_on(b, wait_until)
    assert f"{standby}: started its Patroni again" in done and f"'{cluster.name}: " not in done, done
    assert patroni.member_pid(on_b) not in (None, patroni_pid)
    # The synchronous standby again, as its new Patroni itself says: a failover may go to it.
    wait_until(lambda: _may_take_over(cluster, standby), timeout=90, message="B a candidate again")

    # The cluster's entry on B (issue 39): B's agent runs an HAProxy of the cluster on ports of
    # B's range, reaching whichever member leads; the connection details name both entries.
    _entry_on_b_serves(cluster, a, b, wait_until)

    # A transaction pool on A; the primary's postmaster SIGKILLed: B's member takes over and
    # writes through the pool work again (PgBouncer repointed to B over TCP).
    pools.create_pool(cluster, "writes", "defaultdb", None, "transaction", 3)
    with connect_as_client(cluster) as conn:
        conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
    assert _write(cluster, 0) == primary.port
    # The pool on B too (its PgBouncer, through B's HAProxy), in the pool's connection details.
    entry = ClusterEntry.objects.get(cluster=cluster, node=b.node)
    pool_details = pools.pool_connection_details(cluster.pools.get(name="writes"))
    assert pool_details.more_hosts == ((b.node.address, entry.pooler_port),)
    on_b_pool = {"host": b.node.address, "port": entry.pooler_port}
    assert _write(cluster, -1, **on_b_pool) == primary.port, _diagnosis(cluster, a, b)
    wait_until(lambda: _may_take_over(cluster, standby), timeout=90, message="B replayed the writes")
    with override_settings(PANEL_PROCESS_ROLE="all"):  # the test harness, not the web, kills it
        os.kill(postgres.postmaster_pid(Path(primary.data_dir)) or 0, signal.SIGKILL)
    killed = time.monotonic()
    counter = iter(range(1, 10_000))
    rounds = [killed + 20.0]

    def written_on_b() -> bool:
        # Patroni's callback repoints the pools at once; if a loaded machine loses that, A's
        # reconciler does, as beat runs it every few seconds in production (no beat here).
        if time.monotonic() > rounds[0]:
            taskqueue.send(RECONCILE, [], queue=a.node.tasks_queue)
            rounds[0] = time.monotonic() + 15
        return _write(cluster, next(counter)) == standby.port

    try:
        wait_until(written_on_b, timeout=90, message="a write on B")
    except pytest.fail.Exception:
        pytest.fail(f"no write on B within 90 s\n{_diagnosis(cluster, a, b)}", pytrace=False)
    took = time.monotonic() - killed
    print(f"kill -> first write through the pool on node B: {took:.1f} s")
    wait_until(lambda: _write(cluster, -2, **on_b_pool) == standby.port, timeout=30, message="B's own pool")
    statuses = {s.name: s for s in ha.read_statuses(cluster)}
    assert statuses["member-2"].is_primary
    with connect_as_client(cluster, port=cluster.pooler_port, dbname="writes") as conn:
        assert conn.execute("SELECT count(*) FROM acked WHERE id = 0").fetchone() == (1,)

    # Deleting the cluster removes B's member too (B's agent kills it and removes its files).
    assert services.request_delete(Cluster.objects.get(pk=cluster.pk), confirm_name="spread") is False
    wait_until(lambda: not Cluster.objects.filter(pk=cluster.pk).exists(), timeout=120, message="deleted")
    assert patroni.member_pid(on_b) is None and not data_dir.exists()


def _entry_on_b_serves(cluster: Cluster, a: Agent, b: Agent, wait_until: Callable[..., object]) -> None:
    """B's entry (``entry_points``): its own ports, the primary behind them; the multi-host
    details reach the primary through B when A's HAProxy is gone; a trusted source set on the
    cluster is B's HAProxy's too (pushed through B's agent); B's reconciler starts it again."""
    entry = ClusterEntry.objects.get(cluster=cluster, node=b.node)
    assert b.node.port_first <= entry.port <= b.node.port_last
    details = services.connection_details(cluster)
    assert details.more_hosts == ((b.node.address, entry.port),)
    assert details.target_session_attrs == "read-write"
    with psycopg.connect(details.uri(), connect_timeout=5) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    with connect_as_client(cluster, host=b.node.address, port=entry.port, connect_timeout=5) as conn:
        row = conn.execute("SELECT pg_is_in_recovery(), current_setting('port')::int").fetchone()
    assert row == (False, cluster.members.get(name="member-1").port)

    def standby_read_on_b() -> bool:
        # Once B's new HAProxy has checked the standby (1 s apart); until then the primary serves
        # the port as its backup, and those sessions are cut when the standby comes up.
        try:
            with connect_as_client(
                cluster, host=b.node.address, port=entry.standby_port, connect_timeout=5
            ) as conn:
                return conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        except psycopg.OperationalError:
            return False

    wait_until(standby_read_on_b, timeout=15, message="a standby behind B's read-only port")
    # The panel's superuser, with its own password, is refused through B's entry before any
    # password is asked (pg_hba.conf: no panel role from HAProxy's address).
    with pytest.raises(psycopg.OperationalError, match="pg_hba.conf rejects"):
        connect_as_client(
            cluster,
            host=b.node.address,
            port=entry.port,
            user=settings.PANEL_SUPERUSER,
            password=credentials.superuser_password(cluster),
            dbname="postgres",
            connect_timeout=5,
        )

    # A's HAProxy gone (its node lost, as B's clients see it): the same details reach the primary.
    relative = ha_files.haproxy_config_path(cluster).relative_to(cluster.data_root.parent.parent)
    a_config, b_config = a.data_dir / relative, b.data_dir / relative
    assert haproxy.pid(a_config) is not None and haproxy.pid(b_config) is not None
    with override_settings(PANEL_PROCESS_ROLE="all"):
        haproxy.stop(a_config)
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(services.connection_details(cluster, every_entry=False).uri(), connect_timeout=3)
    with psycopg.connect(details.uri(), connect_timeout=5) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    done = _round_on(a, wait_until)  # A's reconciler starts its HAProxy again
    assert f"{cluster.name}: started HAProxy" in done, done

    # The trusted sources reach B's entry (fail closed: the change waits for B's agent).
    b_sources = b_config.with_name("trusted_sources.lst")
    firewall.set_trusted_sources(cluster, ["198.18.0.77"])
    assert "198.18.0.77/32" in b_sources.read_text()
    firewall.set_trusted_sources(cluster, [])
    assert "198.18.0.77/32" not in b_sources.read_text()

    # B's HAProxy killed: B's reconciler starts it again on the same ports.
    with override_settings(PANEL_PROCESS_ROLE="all"):
        haproxy.stop(b_config)
    done = _round_on(b, wait_until)
    assert f"its entry on {b.node.name} started (ports {entry.port}, {entry.standby_port})" in done, done
    assert haproxy.pid(b_config) is not None


def _diagnosis(cluster: Cluster, *agents: Agent) -> str:
    """What a failover that did not reach B left to read: Patroni's view, the cluster's events,
    where PgBouncer points, and the agents' logs."""
    try:
        statuses = "\n".join(repr(s) for s in ha.read_statuses(cluster))
    except Exception as exc:  # (the diagnosis of a failure must not fail itself)
        statuses = f"statuses unreadable: {exc}"
    events = "\n".join(
        f"{e.created_at:%H:%M:%S} {e.kind}: {e.message}" for e in cluster.events.order_by("created_at")
    )
    inis = [
        p for root in (cluster.data_root, *(x.data_dir for x in agents)) for p in Path(root).rglob("*.ini")
    ]
    targets = "\n".join(
        f"{p}: {line}" for p in inis for line in p.read_text().splitlines() if "host=" in line
    )
    return f"--- Patroni\n{statuses}\n--- events\n{events}\n--- PgBouncer\n{targets}\n{_logs(*agents)}"


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
    wait_until(lambda: _status(cluster) != ClusterStatus.CREATING, timeout=240, message="provisioning")
    if cluster.status != ClusterStatus.ONLINE:
        pytest.fail(f"{cluster.error_message}\n{_logs(a, b)}", pytrace=False)
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
        lambda: _round_on(b, wait_until) and not _holds_password(cluster, on_b_config),
        timeout=180,
        message="B's reconciler rewrites its files",
    )
    # Then a round has nothing to say of the cluster: its files are current. (Not always the next
    # one: until B's Patroni reads its new file at its next loop, it may write its passfile from
    # the old one again, and a round rewrites it again.)
    wait_until(
        lambda: f"'{cluster.name}: " not in _round_on(b, wait_until),
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
        lambda: _synchronous(socket_on_a, primary.port, standby) and _may_take_over(cluster, standby),
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
    wait_until(lambda: _status(cluster) != ClusterStatus.RESIZING, timeout=300, message="the resize")
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
    assert _status(cluster) == ClusterStatus.ONLINE
    assert Cluster.objects.get(pk=cluster.pk).plan_slug == "db-s-2vcpu-4gb"
    assert _show(cluster, standby, "shared_buffers") == large
    # With B's agent gone the pid is unknown, not a number read from A's disk (B's member runs on).
    assert postgres.postmaster_pid(Path(standby.data_dir)) is not None
    wait_until(lambda: Node.objects.get(pk=a.node.pk).is_alive, timeout=30, message="A's heartbeat")
    assert _pids(owner)["member-2"] is None
