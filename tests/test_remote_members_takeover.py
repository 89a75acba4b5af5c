"""Anti-affinity for real (issue 28), a standby's side: a two-member cluster created while two
node agents run (scripts/node_agent.py, each with its own data directory and ports) has its standby
on the other node, built and run by that node's agent (data directory and Patroni's files under
that node's data directory, its own cgroup with the plan's limits there) and supervised by that
node's reconciler; ``members --json`` names both nodes; the cluster's entry on node B serves too;
when the primary's postmaster is SIGKILLed the member on node B takes over and writes through the
cluster's transaction pool (PgBouncer on node A, now over TCP) work again.

It borrows the pair of agents of ``two_nodes`` (tests/fixtures/agent_pair.py) with the other
two-node journeys (conftest.py: TWO_NODE_JOURNEYS); a change of configuration reaching B's member
is tests/test_remote_members_changes.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
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
from panel.clusters.engine import cgroups, postgres
from panel.clusters.models import Cluster, ClusterEntry, ClusterStatus, Node, credentials
from panel.clusters.services import firewall
from panel.clusters.standbys.engine import haproxy, patroni
from panel.clusters.standbys.services import ha, ha_files
from panel.clusters.tests.conftest import connect_as_client
from panel.core import taskqueue
from panel.pools import services as pools
from tests.fixtures.agent_pair import Agent
from tests.fixtures.remote_members import RECONCILE, agent_logs, cluster_status, may_take_over, round_on

pytestmark = pytest.mark.integration


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
    wait_until(lambda: cluster_status(cluster) != ClusterStatus.CREATING, timeout=240, message="provisioning")
    if cluster.status != ClusterStatus.ONLINE:
        pytest.fail(f"{cluster.error_message}\n{agent_logs(a, b)}", pytrace=False)
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
    done = round_on(b, wait_until)
    assert f"{standby}: started its Patroni again" in done and f"'{cluster.name}: " not in done, done
    assert patroni.member_pid(on_b) not in (None, patroni_pid)
    # The synchronous standby again, as its new Patroni itself says: a failover may go to it.
    wait_until(lambda: may_take_over(cluster, standby), timeout=90, message="B a candidate again")

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
    wait_until(lambda: may_take_over(cluster, standby), timeout=90, message="B replayed the writes")
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
    done = round_on(a, wait_until)  # A's reconciler starts its HAProxy again
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
    done = round_on(b, wait_until)
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
    return f"--- Patroni\n{statuses}\n--- events\n{events}\n--- PgBouncer\n{targets}\n{agent_logs(*agents)}"
