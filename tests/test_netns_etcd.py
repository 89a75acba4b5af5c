"""A three-member etcd across network namespaces (issue 39's first real part on nodes with
addresses of their own): each member on its node's 198.18.0.x address, peers and clients over TLS
as the panel starts them (panel/clusters/standbys/lib/etcd.py's argument list and certificates), read and
written from the root namespace with the panel's own client (panel/clusters/standbys/engine/etcd.py).

It elects a leader; the leader's whole node frozen, the other two elect another within a bound; a
write they acknowledge is read back through the old leader once it thaws; nothing is left after.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from panel.clusters.standbys.engine import etcd as etcd_engine
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.core.polling import wait_for
from panel.core.runas import EngineError
from tests.fixtures.netns import needs_root, nh

pytestmark = [pytest.mark.integration, needs_root]

CLIENT_PORT, PEER_PORT = 2379, 2380  # each node has its own network: the same ports on every one
HEALTHY_TIMEOUT = 30.0
# etcd's election timeout is 1 s (heartbeat 100 ms); a loaded machine gets a good margin.
ELECTION_BOUND = 15.0
CATCH_UP_TIMEOUT = 30.0


@dataclass
class EtcdOnNodes:
    harness: Any
    peers: list[etcd_lib.Peer]
    tls: etcd_lib.TlsPaths
    data_dirs: list[Path]

    @property
    def urls(self) -> list[str]:
        return [peer.client_url for peer in self.peers]

    def url_of(self, node: Any) -> str:
        return self.peers[node.index - 1].client_url

    def leader_seen_by(self, urls: list[str]) -> str | None:
        """The leading member's name as the first of ``urls`` that answers sees it; None: none
        answers, or it knows no leader."""
        try:
            leader_id = etcd_engine.leader(urls, self.tls)
            names = {member.id: member.name for member in etcd_engine.members(urls, self.tls)}
        except (EngineError, OSError, ValueError):
            return None
        return names.get(leader_id) or None


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


@contextmanager
def etcd_on_nodes(harness: Any, directory: Path) -> Iterator[EtcdOnNodes]:
    """One etcd member per node of ``harness``, started together as a new cluster, healthy."""
    ca = etcd_lib.new_ca("netns harness etcd CA")
    ca_path = _write(directory / "ca.crt", ca.cert_pem)
    client = etcd_lib.issue(ca, "netns harness test", server=False)
    tls = etcd_lib.TlsPaths(
        ca_path,
        _write(directory / "client.crt", client.cert_pem),
        _write(directory / "client.key", client.key_pem),
    )
    peers = [etcd_lib.Peer(f"node{n.index}", n.address, CLIENT_PORT, PEER_PORT) for n in harness.nodes]
    cluster = EtcdOnNodes(harness, peers, tls, [])
    for node, peer in zip(harness.nodes, peers, strict=True):
        pair = etcd_lib.issue(ca, peer.name, [peer.host, "127.0.0.1"], server=True)
        own = etcd_lib.TlsPaths(
            ca_path,
            _write(directory / f"{peer.name}.crt", pair.cert_pem),
            _write(directory / f"{peer.name}.key", pair.key_pem),
        )
        data_dir = directory / f"{peer.name}.etcd"
        cluster.data_dirs.append(data_dir)
        argv = etcd_lib.member_argv(etcd_engine.ETCD, peer, peers, str(data_dir), own, joining=False)
        with open(directory / f"{peer.name}.log", "ab") as log:
            harness.popen(node, argv, stdout=log, stderr=log)
    for url in cluster.urls:
        if not etcd_engine.wait_healthy(url, tls, HEALTHY_TIMEOUT):
            logs = {p.name: (directory / f"{p.name}.log").read_text()[-1500:] for p in peers}
            pytest.fail(f"etcd at {url} was not healthy within {HEALTHY_TIMEOUT} s; logs: {logs}")
    yield cluster


def _etcd_processes(data_dirs: list[Path]) -> list[int]:
    marks = {f"--data-dir={d}" for d in data_dirs}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if marks & set(proc.info["cmdline"] or ()):
            found.append(proc.info["pid"])
    return found


@pytest.fixture(scope="module")
def etcd(netns: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdOnNodes]:
    with etcd_on_nodes(netns, tmp_path_factory.mktemp("etcd")) as cluster:
        yield cluster


def test_three_members_on_their_own_addresses_elect_a_leader(etcd: EtcdOnNodes) -> None:
    members = etcd_engine.members(etcd.urls, etcd.tls)
    assert sorted((m.name, m.peer_urls) for m in members) == [
        (f"node{n.index}", (f"https://{n.address}:{PEER_PORT}",)) for n in etcd.harness.nodes
    ]
    leaders = {etcd.leader_seen_by([url]) for url in etcd.urls}
    assert len(leaders) == 1 and None not in leaders, f"the members disagree on their leader: {leaders}"


def test_a_frozen_leaders_node_is_replaced_and_an_acknowledged_write_survives_its_return(
    etcd: EtcdOnNodes,
) -> None:
    old = etcd.leader_seen_by(etcd.urls)
    assert old is not None
    lost = etcd.harness.node(int(old.removeprefix("node")))
    survivors = [etcd.url_of(n) for n in etcd.harness.nodes if n is not lost]
    new: list[str | None] = [None]

    def another_leader() -> bool:
        new[0] = etcd.leader_seen_by(survivors)
        return new[0] not in (None, old)

    started = time.monotonic()
    etcd.harness.freeze(lost)
    try:
        elected = wait_for(another_leader, ELECTION_BOUND, interval=0.1)
        took = time.monotonic() - started
        assert elected, f"no new leader among the other two {ELECTION_BOUND} s after {old}'s node froze"
        assert new[0] != old
        value = f"written while {old} was frozen"
        etcd_engine.put(survivors, "/netns/acknowledged", value, etcd.tls)  # acknowledged: it returned
    finally:
        etcd.harness.thaw(lost)

    def read_back() -> bool:
        try:
            return etcd_engine.get([etcd.url_of(lost)], "/netns/acknowledged", etcd.tls) == value
        except (EngineError, OSError):
            return False

    assert wait_for(read_back, CATCH_UP_TIMEOUT, interval=0.1), (
        f"{old} never read back the write after it thawed"
    )
    # It follows a leader among the other two (new[0], unless a later election moved it again).
    assert etcd.leader_seen_by([etcd.url_of(lost)]) not in (None, old), "the thawed member follows another"
    print(f"new leader {new[0]} {took:.1f} s after {old}'s node froze")


def test_nothing_is_left_after_the_cluster_and_its_nodes_are_gone(tmp_path: Path) -> None:
    with nh.harness(nodes=3) as harness, etcd_on_nodes(harness, tmp_path) as cluster:
        prefix, token = harness.layout.prefix, harness.token
        assert cluster.leader_seen_by(cluster.urls) is not None
        assert len(_etcd_processes(cluster.data_dirs)) == 3
    assert _etcd_processes(cluster.data_dirs) == []
    assert nh.remains(prefix, token) == []
