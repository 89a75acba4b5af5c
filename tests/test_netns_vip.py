"""A floating address moved between nodes of their own by the panel's follower (issue 39,
``panel/clusters/standbys/engine/vip_follow.py``): a three-member etcd in network namespaces with the
panel's TLS and authentication on (as tests/test_netns_etcd.py; no ``--enable-v2``: etcd 3.4
serves v3 only, as on a panel), and in two node namespaces the follower started with the
configuration ``standbys/lib/vip.py`` renders for a member there, logged in as the scope's etcd user.

The leader key is written through v3 as Patroni's etcd3 store writes it (a lease of ``ttl``, the
key created only when absent; a switchover deletes it and the next leader creates it), with the
panel's own etcd client. The key names one member: the address comes up on that node's eth0 (``ip
-n``) and answers a TCP client from a third node; it names the other: the address moves and the
client follows (the follower's gratuitous ARP). A node whose cable is pulled drops the address
within the fail-closed bound, and the other node takes it when the key names it: never both. No
cluster's user can read the configuration or signal the follower; nothing outlives the harness.
"""

from __future__ import annotations

import base64
import ipaddress
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from panel.clusters.standbys.engine import etcd as etcd_engine
from panel.clusters.standbys.engine import vip as engine
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib import vip as vip_lib
from panel.clusters.standbys.lib.patroni import NAMESPACE
from panel.core import runas
from panel.core.polling import wait_for
from tests.fixtures.netns import needs_root, nh

pytestmark = [pytest.mark.integration, needs_root]

CLIENT_PORT, PEER_PORT = 2379, 2380
HEALTHY_TIMEOUT = 30.0
# The follower reads the key every 500 ms (standbys/lib/vip.py); a loaded machine gets a wide margin.
MOVE_BOUND = 15.0
# What a loaded machine may add to the fail-closed bound: starting `ip`, the test's own polling.
SLACK = 2.0
SCOPE = "cluster-netns-vip"
SCOPE_PASSWORD = "scope-password-of-the-test"
ROOT_PASSWORD = "root-password-of-the-test"
TTL = 20  # Patroni's ttl on the panel (docs/ha-operations.md)
MEMBERS = ("member-1", "member-2")  # on nodes 1 and 2
# Answers every connection with the word it was given: which node a client reached.
ANSWER = """
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", int(sys.argv[1])))
server.listen(16)
while True:
    conn, _ = server.accept()
    conn.sendall(sys.argv[2].encode() + b"\\n")
    conn.close()
"""
ANSWER_PORT = 7010
TENANT = "nobody"  # stands for a cluster's OS user: unprivileged, no group of root's


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


@dataclass
class Floating:
    harness: Any
    root: etcd_lib.TlsPaths  # the panel's own login (etcd's root user)
    scoped: etcd_lib.TlsPaths  # the scope's user, as standbys/services/vip.py gives the follower
    urls: list[str]
    address: vip_lib.FloatingAddress
    configs: list[Path]
    logs: list[Path]

    def ip(self, node: Any) -> list[str]:
        return [engine.IP[0], "-n", node.namespace]

    def holders(self) -> list[int]:
        """The nodes (indexes) whose eth0 has the floating address now."""
        return [n.index for n in self.harness.nodes if engine.holds(self.address, "eth0", ip=self.ip(n))]

    def take_leader(self, member: str, urls: list[str] | None = None) -> None:
        """``member`` takes the leader key as Patroni's etcd3 store does: any leader's key gone
        (a switchover's delete, or its lease run out), then a lease of ``TTL`` and the key created
        only while absent (``create_revision`` 0), its value the member's name."""
        urls = urls or self.urls
        key = vip_lib.trigger_key(SCOPE)
        etcd_engine.call(urls, "/v3/kv/deleterange", {"key": _b64(key)}, self.root)
        lease = etcd_engine.call(urls, "/v3/lease/grant", {"TTL": TTL}, self.root)["ID"]
        compare = [{"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": 0}]
        put = {"key": _b64(key), "value": _b64(member), "lease": lease}
        answer = etcd_engine.call(
            urls, "/v3/kv/txn", {"compare": compare, "success": [{"request_put": put}]}, self.root
        )
        assert answer.get("succeeded"), f"the leader key was not created: {answer}"

    def wait_holders(self, expected: list[int], bound: float = MOVE_BOUND) -> float:
        """Seconds until exactly ``expected`` hold the address; the test fails past ``bound``."""
        started = time.monotonic()
        if not wait_for(lambda: self.holders() == expected, bound, interval=0.05):
            logs = "\n".join(log.read_text()[-2000:] for log in self.logs if log.exists())
            pytest.fail(f"the address is on {self.holders()}, not {expected}, after {bound} s\n{logs}")
        return time.monotonic() - started


def _start_etcd(harness: Any, directory: Path) -> tuple[etcd_lib.TlsPaths, etcd_lib.TlsPaths, list[str]]:
    """One member per node with the panel's argument list (no v2), then the scope's user and
    role and etcd's root, and authentication on, as standbys/services/etcd_auth.py leaves them."""
    ca = etcd_lib.new_ca("netns vip etcd CA")
    ca_path = _write(directory / "ca.crt", ca.cert_pem)
    client = etcd_lib.issue(ca, "netns vip test", server=False)
    plain = etcd_lib.TlsPaths(
        ca_path,
        _write(directory / "client.crt", client.cert_pem),
        _write(directory / "client.key", client.key_pem),
    )
    peers = [etcd_lib.Peer(f"node{n.index}", n.address, CLIENT_PORT, PEER_PORT) for n in harness.nodes]
    for node, peer in zip(harness.nodes, peers, strict=True):
        pair = etcd_lib.issue(ca, peer.name, [peer.host, "127.0.0.1"], server=True)
        own = etcd_lib.TlsPaths(
            ca_path,
            _write(directory / f"{peer.name}.crt", pair.cert_pem),
            _write(directory / f"{peer.name}.key", pair.key_pem),
        )
        argv = etcd_lib.member_argv(
            etcd_engine.ETCD, peer, peers, str(directory / f"{peer.name}.etcd"), own, joining=False
        )
        assert not any("enable-v2" in arg for arg in argv)
        with open(directory / f"{peer.name}.log", "ab") as log:
            harness.popen(node, argv, stdout=log, stderr=log)
    urls = [peer.client_url for peer in peers]
    for url in urls:
        if not etcd_engine.wait_healthy(url, plain, HEALTHY_TIMEOUT):
            pytest.fail(f"etcd at {url} was not healthy within {HEALTHY_TIMEOUT} s")
    root = etcd_lib.TlsPaths(plain.ca, plain.cert, plain.key, etcd_lib.ROOT, ROOT_PASSWORD)
    scoped = etcd_lib.TlsPaths(plain.ca, plain.cert, plain.key, SCOPE, SCOPE_PASSWORD)
    etcd_engine.ensure_prefix_role(urls, SCOPE, etcd_lib.scope_prefix(NAMESPACE, SCOPE), plain)
    etcd_engine.ensure_user(urls, SCOPE, SCOPE_PASSWORD, SCOPE, plain)
    etcd_engine.ensure_user(urls, etcd_lib.ROOT, ROOT_PASSWORD, etcd_lib.ROOT, plain)
    etcd_engine.enable_auth(urls, plain)
    assert etcd_engine.auth_enabled(urls, root)
    return root, scoped, urls


def _floating_address(harness: Any) -> vip_lib.FloatingAddress:
    """The slot's tenth address: the harness's own /28, taken by no node (nodes are .11 to .14)."""
    network = ipaddress.ip_interface(f"{harness.nodes[0].address}/28").network
    return vip_lib.parse_address(f"{network.network_address + 10}/{network.prefixlen}")


@pytest.fixture
def private_dir() -> Iterator[Path]:
    """Where standbys/services/vip.py keeps the configurations: a 0700 directory of root's, here in a
    directory anyone may pass through (/tmp's), so only its own modes keep a tenant out."""
    outer = Path(tempfile.mkdtemp(prefix="netns-vip-", dir="/tmp"))
    outer.chmod(0o711)
    directory = outer / "vip"
    runas.make_private_dir(directory, runas.current_user())
    yield directory
    shutil.rmtree(outer)


@pytest.fixture
def floating(tmp_path: Path, private_dir: Path) -> Iterator[Floating]:
    with nh.harness(nodes=3) as harness:
        root, scoped, urls = _start_etcd(harness, tmp_path)
        address = _floating_address(harness)
        setup = Floating(harness, root, scoped, urls, address, [], [])
        for index, member in enumerate(MEMBERS):
            node = harness.node(index + 1)
            path = private_dir / f"{SCOPE}.{member}.json"
            config = vip_lib.VipConfig(address, "eth0", SCOPE, member, urls, scoped)
            runas.write_private_file(path, vip_lib.render(config), owner=runas.current_user())
            log = tmp_path / f"{member}.log"
            setup.configs.append(path)
            setup.logs.append(log)
            with open(log, "ab") as out:
                harness.popen(node, engine.argv(path), stdout=out, stderr=subprocess.STDOUT)
            harness.popen(node, [sys.executable, "-c", ANSWER, str(ANSWER_PORT), f"node{node.index}"])
        assert wait_for(lambda: all(engine.is_running(c) for c in setup.configs), 10, interval=0.1)
        yield setup


def _reaches(setup: Floating, word: str) -> bool:
    """A client on node 3 that connects to the floating address gets ``word``'s answer."""
    try:
        sock = setup.harness.connect(setup.harness.node(3), setup.address.ip, ANSWER_PORT, timeout=1)
    except OSError:
        return False
    with sock:
        try:
            return sock.recv(64).decode().strip() == word
        except OSError:
            return False


def test_the_address_follows_the_leader_key_patroni_writes_in_v3(floating: Floating) -> None:
    time.sleep(1.0)  # a few rounds without a key: the address is nowhere
    assert floating.holders() == []
    floating.take_leader(MEMBERS[0])
    came_up = floating.wait_holders([1])
    assert wait_for(lambda: _reaches(floating, "node1"), MOVE_BOUND, interval=0.2), "no client reached node 1"

    # A change of etcd's users voids every token given so far: the followers log in again.
    etcd_engine.ensure_user(floating.urls, "someone-else", "pw", SCOPE, floating.root)
    floating.take_leader(MEMBERS[1])  # a switchover: the key deleted, the other member takes it
    moved = floating.wait_holders([2])
    assert wait_for(lambda: _reaches(floating, "node2"), MOVE_BOUND, interval=0.2), (
        "a client on node 3 still reached node 1 (no gratuitous ARP?)"
    )
    print(f"address up {came_up:.2f} s after the key was written, moved in {moved:.2f} s")

    # Stopped (SIGTERM), the follower takes the address off itself.
    engine.stop(floating.configs[1], None, "eth0")
    assert not engine.is_running(floating.configs[1])
    assert floating.holders() == []
    assert "removed from eth0" in floating.logs[1].read_text().splitlines()[-1]


def test_a_node_cut_off_from_etcd_drops_the_address_and_the_other_takes_it(floating: Floating) -> None:
    floating.take_leader(MEMBERS[0])
    floating.wait_holders([1])
    bound = vip_lib.fail_closed_seconds(
        vip_lib.VipConfig(floating.address, "eth0", SCOPE, "m", ["https://x"], floating.scoped)
    )

    floating.harness.link_down(floating.harness.node(1))
    dropped = floating.wait_holders([], bound + SLACK)
    assert "fail closed" in floating.logs[0].read_text()
    # Patroni's lease runs out (ttl) and member-2 takes the key, through the members left.
    floating.take_leader(MEMBERS[1], floating.urls[1:])
    taken = floating.wait_holders([2])
    assert wait_for(lambda: _reaches(floating, "node2"), MOVE_BOUND, interval=0.2), "no client reached node 2"
    floating.harness.link_up(floating.harness.node(1))
    time.sleep(2.0)  # node 1 reads etcd again: the key is member-2's
    assert floating.holders() == [2]
    print(f"dropped {dropped:.2f} s after the link went down (bound {bound} s), taken in {taken:.2f} s")


def _as_tenant(code: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-I", "-c", code, *args], user=TENANT, capture_output=True, text=True, check=False
    )
    return (result.stdout + result.stderr).strip()


def test_no_clusters_user_reads_the_configuration_or_signals_the_follower(floating: Floating) -> None:
    config = floating.configs[0]
    assert config.stat().st_mode & 0o777 == 0o600 and config.stat().st_uid == 0
    assert config.parent.stat().st_mode & 0o777 == 0o700 and config.parent.stat().st_uid == 0
    pid = engine.pid(config)
    assert pid is not None and psutil.Process(pid).uids().effective == 0
    attempt = """
import os, sys
for what, act in (("read", lambda: open(sys.argv[1]).read()), ("list", lambda: os.listdir(sys.argv[2])),
                  ("signal", lambda: os.kill(int(sys.argv[3]), 15))):
    try:
        act()
        print(what, "allowed")
    except PermissionError:
        print(what, "refused")
"""
    said = _as_tenant(attempt, str(config), str(config.parent), str(pid))
    assert said.splitlines() == ["read refused", "list refused", "signal refused"], said
    assert engine.is_running(config)
    assert SCOPE_PASSWORD not in " ".join(psutil.Process(pid).cmdline())


def test_nothing_of_the_follower_outlives_the_harness(tmp_path: Path) -> None:
    with nh.harness(nodes=3) as harness:
        prefix, token = harness.layout.prefix, harness.token
        _root, scoped, urls = _start_etcd(harness, tmp_path)
        config = tmp_path / "member-1.json"
        rendered = vip_lib.VipConfig(_floating_address(harness), "eth0", SCOPE, "member-1", urls, scoped)
        config.write_text(vip_lib.render(rendered))
        harness.popen(
            harness.node(1), engine.argv(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        assert wait_for(lambda: engine.is_running(config), 10, interval=0.1)
    assert not engine.is_running(config)
    assert [
        p.pid for p in psutil.process_iter(["cmdline"]) if f"--config={config}" in (p.info["cmdline"] or [])
    ] == []
    assert nh.remains(prefix, token) == []
