"""A whole machine lost under three writers, in the namespace harness (issue 39): what
tests/test_netns_machine_loss.py asserts and ``scripts/perf/failover.py --scenarios machine-loss``
measures, written once.

The cluster's own node (its row's node: it runs the first entry, and the primary is moved there
first) is frozen (every process of its namespace SIGSTOPped) or cut off (its link down) while
three writers commit sequential ids, each in a thread of its own: through the cluster's
multi-host URI, through a pool's multi-host URI, through the floating address. A writer whose
statement has not answered in ``STALL`` seconds shuts its socket (a frozen server's kernel still
acknowledges TCP, so nothing else would end the wait) and connects again. In the link-down case a
client inside the isolated namespace writes straight to the old primary's member port and logs
each acknowledged commit with its monotonic time (one clock for every namespace): none may come
after the new primary's first acknowledged write. Then the node comes back, its member must stream
from the new primary again, and every acknowledged id must be on the new primary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg

from panel.clusters.models import Cluster, ClusterMember, ClusterStatus, EtcdMember, EtcdMemberState
from panel.clusters.services.overview import connection_details
from panel.clusters.standbys.engine import etcd as etcd_engine
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import switchover as switchover_service
from panel.clusters.standbys.services import vip
from panel.core.errors import ServiceError
from panel.core.polling import wait_for
from tests import nsview
from tests.fixtures.nsnodes import NsAgent, NsNodes
from tests.loss_writers import CONNECT_TIMEOUT, ISOLATED, Writer, isolated_acks

FAILOVER_TIMEOUT = 90.0
STREAMING_TIMEOUT = 120.0
AFTER_WRITES = 2.0  # the writers go on this long after the slowest one's first write
WRITERS = ("multi-host", "pool", "floating")


@dataclass
class Setup:
    """The cluster under test, its writers' URIs and its floating address."""

    cluster: Cluster
    uris: dict[str, str]
    floating: str


@dataclass
class Loss:
    """One machine lost: per writer the seconds from the loss to its first acknowledged write,
    acknowledged commits and lost ones, unknown outcomes, the isolated client's commits after
    the loss and after the new primary's first write, and the seconds from the node's return
    until its member streams again."""

    kind: str
    first_write: dict[str, float | None]
    acked: int
    lost: int
    unknown: int
    isolated_after_loss: int | None
    split_brain: int | None
    streaming_again: float
    etcd_leader_was_there: bool
    new_primary: str
    etcd_elections: int  # from before the loss until the member streams again

    @property
    def slowest(self) -> float:
        times = list(self.first_write.values())
        return float("inf") if None in times else max(t for t in times if t is not None)


def prepare(nsnodes: NsNodes, owner: Any) -> Setup:
    """A three-member cluster on the three nodes, online; the panel's etcd grown to three
    members (one per node: losing one node leaves a quorum) that every Patroni follows; a pool,
    the slot's tenth address floating (eth0, the harness's interface), the ``acked`` table."""
    from panel.clusters import services
    from panel.pools import services as pools
    from panel.pools.services.figures import pool_connection_details

    cluster = services.create_cluster(owner, name="lossy", plan_slug="db-s-1vcpu-2gb", num_nodes=3)

    def settled() -> bool:
        cluster.refresh_from_db()
        return cluster.status != ClusterStatus.CREATING

    if not wait_for(settled, 240, interval=0.5) or cluster.status != ClusterStatus.ONLINE:
        raise AssertionError(f"the cluster not online: {cluster.error_message}\n{nsnodes.logs()}")

    def three_etcd_members_followed() -> bool:
        rows = list(EtcdMember.objects.all())
        wanted = sorted(f"{r.host}:{r.client_port}" for r in rows)
        ok = len(rows) == 3 and all(r.state == EtcdMemberState.RUNNING for r in rows)
        for member in cluster.members.select_related("node") if ok else []:
            status, text = patroni.rest("GET", member.rest_port, "/config", timeout=2, host=member.host)
            ok = ok and status == 200
        ok = ok and all(
            wanted == sorted(json.loads(p.read_text())["etcd3"]["hosts"]) for p in _configs(nsnodes, cluster)
        )
        if not ok:
            nsview.reconcile_everywhere(nsnodes)
        return ok

    if not wait_for(three_etcd_members_followed, 180, interval=3):
        raise AssertionError(
            f"etcd: {list(EtcdMember.objects.values_list('name', 'state'))}\n{nsnodes.logs()}"
        )
    learned_etcd_members(cluster, nsnodes)
    details = connection_details(cluster)
    with psycopg.connect(details.uri(), autocommit=True, connect_timeout=5) as conn:
        conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY, writer text)")
    pool = pools.create_pool(cluster, "lossy-pool", details.database, None, "transaction", 5)
    network = nsnodes.harness.layout.network  # its tenth address: no node's (they are .11 to .13)
    floating = str(network.network_address + 10)
    vip.set_floating_address(cluster, f"{floating}/{network.prefixlen}")
    cluster.refresh_from_db()
    nsview.reconcile_everywhere(nsnodes)  # each entry's HAProxy binds the floating address too
    uris = {
        "multi-host": details.uri(),
        "pool": pool_connection_details(pool).uri(),
        "floating": floating_uri(cluster, floating),
    }
    return Setup(cluster, uris, floating)


def learned_etcd_members(cluster: Cluster, nsnodes: NsNodes) -> None:
    """Waits until every member's Patroni knows the three etcd members. Patroni 4.1.5 keeps the
    etcd hosts it started with (a reload changes only the credentials) and learns etcd's member
    list again only ``10 * ttl`` (200 s) after its start; a Patroni started while the panel's
    etcd had one member (the cluster's node's) asks that one alone until then, so losing that
    node within the window stops every failover (found here; docs/ha-operations.md)."""
    started = []
    for path in _configs(nsnodes, cluster):
        pid = patroni.member_pid(path)
        assert pid is not None, path
        started.append(psutil.Process(pid).create_time())
    # Its refresh comes on the first loop after the window: on a loaded machine 5 s of margin were
    # once not enough (the freeze then found a Patroni that still asked the lost node's etcd alone).
    time.sleep(max(0.0, max(started) + 10 * patroni_lib.TTL + 30 - time.time()))


def _configs(nsnodes: NsNodes, cluster: Cluster) -> list[Path]:
    from panel.clusters.standbys.services.ha_files import member_config_path

    data_root = cluster.data_root.parent.parent
    return [
        nsnodes.agent_on(m.node.name).data_dir / member_config_path(cluster, m).relative_to(data_root)
        for m in cluster.members.select_related("node")
    ]


def as_harness() -> Any:
    """The test harness, not the web, starts, signals and cuts off (the web's audit hook)."""
    from django.test import override_settings

    return override_settings(PANEL_PROCESS_ROLE="all")


def floating_uri(cluster: Cluster, address: str) -> str:
    """The cluster's connection details on its floating address alone (the cluster's ports)."""
    details = connection_details(cluster)
    return dataclasses.replace(details, host=address, more_hosts=(), target_session_attrs="").uri()


def sync_state(member: ClusterMember) -> dict[str, Any]:
    """Patroni's dynamic configuration as ``member`` serves it (``synchronous_mode``…)."""
    status, text = patroni.rest("GET", member.rest_port, "/config", timeout=3, host=member.host)
    return dict(json.loads(text)) if status == 200 else {}


def sync_standby(cluster: Cluster, exclude: int) -> str | None:
    """The synchronous standby, streaming, as a member other than ``exclude`` says (Patroni's
    ``/cluster``); None while there is none."""
    for member in cluster.members.exclude(pk=exclude):
        with contextlib.suppress(OSError, ValueError):
            status, text = patroni.rest("GET", member.rest_port, "/cluster", timeout=2, host=member.host)
            if status == 200:
                found = json.loads(text).get("members", [])
                return next(
                    (
                        m["name"]
                        for m in found
                        if (m.get("role"), m.get("state")) == ("sync_standby", "streaming")
                    ),
                    None,
                )
    return None


def primary_on_own_node(nsnodes: NsNodes, cluster: Cluster) -> ClusterMember:
    """The primary moved to the cluster's own node (a switchover when it is elsewhere), both
    standbys streaming from it and a synchronous standby named (only that one may take over)."""
    found: list[Any] = [None]

    def settled(target: int | None) -> bool:
        found[0] = nsview.replication(nsnodes, cluster)
        return (
            found[0] is not None
            and (target is None or found[0][0].pk == target)
            and [s for _, s in found[0][1]] == ["streaming", "streaming"]
        )

    if not wait_for(lambda: settled(None), STREAMING_TIMEOUT, interval=0.5):
        raise AssertionError(f"two standbys streaming: {found[0]}")
    own = cluster.members.get(node_id=cluster.node_id)
    for _round in range(4):
        if found[0][0].pk == own.pk:
            break
        # Only the synchronous standby may take over: the own member when it is that one, else
        # the synchronous standby, whose promotion names a synchronous standby anew.
        before = found[0][0].pk
        wait_for(lambda b=before: sync_standby(cluster, b) is not None, STREAMING_TIMEOUT, interval=0.5)
        target = own.name if sync_standby(cluster, before) == own.name else None

        def switched(to: str | None = target) -> bool:
            try:  # refused while Patroni still calls it starting (back from a loss, say)
                switchover_service.switchover(cluster, to)
            except ServiceError:
                return False
            return True

        if not wait_for(switched, STREAMING_TIMEOUT, interval=2.0):
            raise AssertionError(f"no switchover to {target or 'the synchronous standby'}")
        if not wait_for(
            lambda b=before: settled(None) and found[0][0].pk != b, STREAMING_TIMEOUT, interval=0.5
        ):
            raise AssertionError(f"no new primary after a switchover: {found[0]}")
    if found[0][0].pk != own.pk:
        raise AssertionError(f"the primary not on the cluster's node after four switchovers: {found[0]}")
    primary = found[0][0]
    if not wait_for(lambda: sync_standby(cluster, primary.pk) is not None, STREAMING_TIMEOUT, interval=0.5):
        raise AssertionError("no synchronous standby streaming")
    return primary


def start_isolated(
    nsnodes: NsNodes, agent: NsAgent, cluster: Cluster, member: ClusterMember, log: Path, first: int
) -> subprocess.Popen[bytes]:
    """The client inside ``agent``'s namespace, connected straight to ``member``'s port."""
    details = connection_details(cluster, every_entry=False)
    direct = dataclasses.replace(details, host=member.host, port=member.port, more_hosts=())
    argv = [sys.executable, "-c", ISOLATED, direct.uri(), str(log), str(first)]
    with as_harness():
        proc = nsnodes.harness.popen(agent.node, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not wait_for(lambda: log.exists() and "ack " in log.read_text(), 20, interval=0.1):
        with as_harness():
            proc.kill()
        raise AssertionError(
            f"the isolated client acknowledged nothing: {log.read_text() if log.exists() else ''}"
        )
    return proc


def _ids_present(cluster: Cluster) -> set[int]:
    uri = connection_details(cluster).uri()
    for _attempt in range(60):
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(uri, connect_timeout=CONNECT_TIMEOUT) as conn,
        ):
            return {int(row[0]) for row in conn.execute("SELECT id FROM acked")}
        time.sleep(0.5)
    raise AssertionError("the acknowledged ids could not be read back")


def lose(
    nsnodes: NsNodes,
    setup: Setup,
    kind: str,
    log: Path,
    while_down: Any = None,
    etcd_leader_there: bool = False,
) -> Loss:
    """One trial: the primary on the cluster's own node (and the etcd leader with it when
    ``etcd_leader_there``), the three writers committing, the node frozen (``kind`` "freeze") or
    cut off ("link-down", with the isolated client logging to ``log``) until every writer wrote
    again, ``while_down(agent)`` then, the node back, its member streaming again."""
    cluster = setup.cluster
    assert cluster.node is not None
    old = primary_on_own_node(nsnodes, cluster)
    agent = nsnodes.agent_on(cluster.node.name)
    if etcd_leader_there:
        leader_node = nsview.etcd_leader_to(nsnodes, agent.name)
    else:
        urls, tls, names = nsview.etcd_view(nsnodes)
        leader_node = names.get(etcd_engine.leader(urls, tls), "")
    term = nsview.etcd_term(nsnodes)
    base = (int(time.time()) % 10**6) * 10**8
    writers = [Writer(name, setup.uris[name], base + i * 10**7) for i, name in enumerate(WRITERS)]
    threads = [thread for writer in writers for thread in writer.start()]
    isolated = None
    try:
        if not wait_for(lambda: all(len(w.acked) >= 20 for w in writers), 30, interval=0.1):
            raise AssertionError(
                f"writers before the loss: {[(w.name, len(w.acked), len(w.unknown)) for w in writers]}"
            )
        if kind == "link-down":
            isolated = start_isolated(nsnodes, agent, cluster, old, log, base + 9 * 10**7)
            time.sleep(1.0)
        with as_harness():
            lost_at = time.monotonic()
            if kind == "freeze":
                nsnodes.harness.freeze(agent.node)
            else:
                nsnodes.harness.link_down(agent.node)
        try:
            wrote = wait_for(
                lambda: all(w.first_after(lost_at) is not None for w in writers),
                FAILOVER_TIMEOUT,
                interval=0.1,
            )
            time.sleep(AFTER_WRITES)
            if wrote and while_down is not None:
                while_down(agent)
        finally:
            with as_harness():
                if isolated is not None:
                    isolated.kill()
                    isolated.wait(timeout=10)
                if kind == "freeze":
                    nsnodes.harness.thaw(agent.node)
                else:
                    nsnodes.harness.link_up(agent.node)
        back_at = time.monotonic()
    finally:
        for writer in writers:
            writer.stop.set()
        for thread in threads:
            thread.join(timeout=15)
    first = {w.name: w.first_after(lost_at) for w in writers}
    found: list[Any] = [None]

    def old_streams() -> bool:
        found[0] = nsview.replication(nsnodes, cluster)
        return (
            found[0] is not None
            and found[0][0].pk != old.pk
            and sorted(found[0][1])
            == sorted((m.host, "streaming") for m in cluster.members.exclude(pk=found[0][0].pk))
        )

    if not wait_for(old_streams, STREAMING_TIMEOUT, interval=0.5):
        raise AssertionError(f"{old.name} not streaming again: {found[0]}\n{nsnodes.logs()}")
    streaming_again = time.monotonic() - back_at
    present = _ids_present(cluster)
    acked = [n for w in writers for n, _t in w.acked]
    split = after_loss = None
    if kind == "link-down":
        acks = isolated_acks(log)
        new_first = min((lost_at + t for t in first.values() if t is not None), default=float("inf"))
        split = sum(1 for t in acks if t > new_first)
        after_loss = sum(1 for t in acks if t > lost_at)
    return Loss(
        kind,
        first,
        len(acked),
        sum(1 for n in acked if n not in present),
        sum(len(w.unknown) for w in writers),
        after_loss,
        split,
        streaming_again,
        leader_node == agent.name,
        found[0][0].name,
        nsview.etcd_term(nsnodes) - term,
    )
