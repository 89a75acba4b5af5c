"""A floating address moved by vip-manager between nodes of their own (issue 39): a three-member
etcd in network namespaces with the panel's TLS (as tests/test_netns_etcd.py), and in two node
namespaces Debian's vip-manager started with the configuration ``lib/vip.py`` renders for a member
there. The leader key names one member: the address comes up on that node's eth0 (``ip -n``) and
answers a TCP client from a third node; the key names the other: the address moves, and a client
reaches the new node (vip-manager's gratuitous ARP); ``engine/vip.py``'s stop takes it off the
holder's interface, and nothing of vip-manager outlives the harness.

vip-manager 1.0.2 (Debian 12's) reads the leader key through etcd's **v2** API, a keyspace of its
own that Patroni's ``etcd3`` store never writes and that etcd 3.4 serves only with ``--enable-v2``.
Here etcd runs with it and the test writes the key there, as Patroni would write it in v3; one test
shows that the v3 key Patroni writes is not seen (docs/ha-operations.md, "A floating address").
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psutil
import pytest

from panel.clusters.engine import etcd as etcd_engine
from panel.clusters.engine import vip as engine
from panel.clusters.lib import etcd as etcd_lib
from panel.clusters.lib import vip as vip_lib
from panel.core.polling import wait_for
from tests.fixtures.netns import needs_root, nh

pytestmark = [pytest.mark.integration, needs_root]

CLIENT_PORT, PEER_PORT = 2379, 2380
HEALTHY_TIMEOUT = 30.0
# vip-manager reads the key every 500 ms (lib/vip.py); a loaded machine gets a wide margin.
MOVE_BOUND = 15.0
SCOPE = "cluster-netns-vip"
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


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


@dataclass
class Floating:
    harness: Any
    tls: etcd_lib.TlsPaths
    urls: list[str]
    address: vip_lib.FloatingAddress
    configs: list[Path]
    logs: list[Path]

    def ip(self, node: Any) -> list[str]:
        return [engine.IP[0], "-n", node.namespace]

    def holders(self) -> list[int]:
        """The nodes (indexes) whose eth0 has the floating address now."""
        return [n.index for n in self.harness.nodes if engine.holds(self.address, "eth0", ip=self.ip(n))]

    def put_v2(self, value: str) -> None:
        """The leader key through etcd's v2 API (what vip-manager 1.0.2 reads)."""
        url = _host_port(self.urls[0])
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.tls.ca)
        context.load_cert_chain(self.tls.cert, self.tls.key)
        conn = http.client.HTTPSConnection(url[0], url[1], timeout=5, context=context)
        try:
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            conn.request("PUT", f"/v2/keys{vip_lib.trigger_key(SCOPE)}", urlencode({"value": value}), headers)
            response = conn.getresponse()
            body = response.read().decode()
        finally:
            conn.close()
        assert response.status in (200, 201), f"etcd v2 PUT answered {response.status}: {body}"

    def log_lines(self, index: int) -> int:
        return len(self.logs[index].read_text().splitlines()) if self.logs[index].exists() else 0


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    return host, int(port)


def _start_etcd(harness: Any, directory: Path) -> tuple[etcd_lib.TlsPaths, list[str]]:
    """One member per node with the panel's argument list, plus ``--enable-v2`` (see the module)."""
    ca = etcd_lib.new_ca("netns vip etcd CA")
    ca_path = _write(directory / "ca.crt", ca.cert_pem)
    client = etcd_lib.issue(ca, "netns vip test", server=False)
    tls = etcd_lib.TlsPaths(
        ca_path,
        _write(directory / "client.crt", client.cert_pem),
        _write(directory / "client.key", client.key_pem),
        # The scope's user, as services/vip.py gives vip-manager (authentication is off here).
        user=SCOPE,
        password="not-checked-here",
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
        with open(directory / f"{peer.name}.log", "ab") as log:
            harness.popen(node, [*argv, "--enable-v2=true"], stdout=log, stderr=log)
    urls = [peer.client_url for peer in peers]
    plain = etcd_lib.TlsPaths(tls.ca, tls.cert, tls.key)
    for url in urls:
        if not etcd_engine.wait_healthy(url, plain, HEALTHY_TIMEOUT):
            pytest.fail(f"etcd at {url} was not healthy within {HEALTHY_TIMEOUT} s")
    return tls, urls


def _floating_address(harness: Any) -> vip_lib.FloatingAddress:
    """The slot's tenth address: the harness's own /28, taken by no node (nodes are .11 to .14)."""
    network = ipaddress.ip_interface(f"{harness.nodes[0].address}/28").network
    return vip_lib.parse_address(f"{network.network_address + 10}/{network.prefixlen}")


@pytest.fixture
def floating(tmp_path: Path) -> Iterator[Floating]:
    with nh.harness(nodes=3) as harness:
        tls, urls = _start_etcd(harness, tmp_path)
        address = _floating_address(harness)
        setup = Floating(harness, tls, urls, address, [], [])
        for index, member in enumerate(MEMBERS):
            node = harness.node(index + 1)
            config = vip_lib.VipConfig(address, "eth0", SCOPE, member, urls, tls)
            path = tmp_path / f"{member}.yml"
            path.write_text(vip_lib.render(config))
            path.chmod(0o600)
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


def test_the_address_follows_the_leader_key_from_node_to_node(floating: Floating) -> None:
    assert floating.holders() == []
    started = time.monotonic()
    floating.put_v2(MEMBERS[0])
    assert wait_for(lambda: floating.holders() == [1], MOVE_BOUND, interval=0.1), (
        f"the address is on {floating.holders()}, not node 1, {MOVE_BOUND} s after the key named {MEMBERS[0]}"
    )
    came_up = time.monotonic() - started
    assert wait_for(lambda: _reaches(floating, "node1"), MOVE_BOUND, interval=0.2), "no client reached node 1"

    started = time.monotonic()
    floating.put_v2(MEMBERS[1])
    assert wait_for(lambda: floating.holders() == [2], MOVE_BOUND, interval=0.1), (
        f"the address is on {floating.holders()}, not node 2, {MOVE_BOUND} s after the key named {MEMBERS[1]}"
    )
    moved = time.monotonic() - started
    assert wait_for(lambda: _reaches(floating, "node2"), MOVE_BOUND, interval=0.2), (
        "a client on node 3 still reached node 1 (no gratuitous ARP?)"
    )
    print(f"address up {came_up:.2f} s after the key was written, moved in {moved:.2f} s")

    # Stopped, vip-manager 1.0.2 leaves the address where it is: engine.stop takes it off.
    holder = floating.harness.node(2)
    engine.stop(floating.configs[1], floating.address, "eth0", ip=floating.ip(holder))
    assert not engine.is_running(floating.configs[1])
    assert floating.holders() == []


def test_the_key_patroni_writes_in_etcd_v3_is_not_what_vip_manager_reads(floating: Floating) -> None:
    """Patroni's etcd3 store writes the leader key in the v3 keyspace; vip-manager 1.0.2 asks the
    v2 API for it and finds nothing (``Key not found``), so the address stays down."""
    plain = etcd_lib.TlsPaths(floating.tls.ca, floating.tls.cert, floating.tls.key)
    etcd_engine.put(floating.urls, vip_lib.trigger_key(SCOPE), MEMBERS[0], plain)
    seen = floating.log_lines(0)

    def read_again_since() -> bool:
        lines = floating.logs[0].read_text().splitlines()[seen:]
        return any(re.search(r"Key not found", line) for line in lines)

    assert wait_for(read_again_since, MOVE_BOUND, interval=0.1), "vip-manager did not read the key again"
    assert floating.holders() == []


def test_nothing_of_vip_manager_outlives_the_harness(tmp_path: Path) -> None:
    with nh.harness(nodes=3) as harness:
        prefix, token = harness.layout.prefix, harness.token
        tls, urls = _start_etcd(harness, tmp_path)
        config = tmp_path / "member-1.yml"
        rendered = vip_lib.VipConfig(_floating_address(harness), "eth0", SCOPE, "member-1", urls, tls)
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
