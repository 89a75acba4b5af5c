"""An address of this machine that is not loopback, and a redis-server listening on it: what a
tenant pointed log sinks and migration sources at (issue 37, item 5)."""

from __future__ import annotations

import ipaddress
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil
import pytest
import redis

from tests import pgserver
from tests.fixtures.processes import redis_answers

# The interface a test makes when the machine has none but loopback (CI runs as root).
DUMMY_INTERFACE = "pgpanel-sec0"
DUMMY_ADDRESS = "198.18.0.1"
# Addresses a test names as another machine's (a node's, a sink's) that no packet may ever leave
# for: while ``unreachable`` holds, the kernel answers them "no route to host" at once, so even a
# regression that connects sends nothing past this machine.
FAR_NETWORK = "198.18.0.64/26"
FAR_NODE_ADDRESS, FAR_NODE_PRIVATE, FAR_ELSEWHERE = "198.18.0.77", "198.18.0.78", "198.18.0.79"


# The network-namespace harness's bridges (scripts/netns_slots.py) have addresses in this range
# while another test process runs one: never this machine's own, as they go with that test.
HARNESS_NETWORK = ipaddress.ip_network("198.18.0.0/24")


def _usable(text: str) -> bool:
    address = ipaddress.ip_address(text)
    return not (
        address.is_loopback or address.is_link_local or address.is_multicast or address in HARNESS_NETWORK
    )


@contextmanager
def own_address() -> Iterator[str]:
    """An IPv4 address of one of this machine's interfaces, not loopback; made on a dummy
    interface (and removed afterwards) when there is none."""
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family == socket.AF_INET and _usable(entry.address):
                yield entry.address
                return
    ip = shutil.which("ip") or "/usr/sbin/ip"
    # A dummy interface; a bridge without ports where the kernel has no dummy driver (containers).
    made = subprocess.run([ip, "link", "add", DUMMY_INTERFACE, "type", "dummy"], check=False, timeout=10)
    if made.returncode != 0:
        subprocess.run([ip, "link", "add", DUMMY_INTERFACE, "type", "bridge"], check=True, timeout=10)
    try:
        subprocess.run([ip, "addr", "add", f"{DUMMY_ADDRESS}/24", "dev", DUMMY_INTERFACE], check=True,
                       timeout=10)  # fmt: skip
        subprocess.run([ip, "link", "set", DUMMY_INTERFACE, "up"], check=True, timeout=10)
        yield DUMMY_ADDRESS
    finally:
        subprocess.run([ip, "link", "del", DUMMY_INTERFACE], check=False, timeout=10)


@contextmanager
def unreachable(network: str = FAR_NETWORK) -> Iterator[str]:
    """``network`` routed nowhere (an ``unreachable`` route, removed afterwards; CI runs as root)."""
    ip = shutil.which("ip") or "/usr/sbin/ip"
    subprocess.run([ip, "route", "replace", "unreachable", network], check=True, timeout=10)
    try:
        yield network
    finally:
        subprocess.run([ip, "route", "del", "unreachable", network], check=False, timeout=10)


@dataclass
class OwnRedis:
    address: str
    port: int
    client: redis.Redis

    def settled(self, connections: int) -> bool:
        """Whether ``connections`` clients besides the test's own came and went (Redis read
        everything a client sent before it noticed the client had closed)."""
        stats = self.client.info("stats")
        clients = self.client.info("clients")
        return (
            int(stats["total_connections_received"]) >= connections + 1
            and int(clients["connected_clients"]) == 1
        )


@contextmanager
def own_redis(address: str, outside: tuple[int, int]) -> Iterator[OwnRedis]:
    """A throwaway redis-server on ``address`` (no password, as a service of the machine that
    trusts its own network), on a port outside ``outside``."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; run `make test`, which installs it")
    port = pgserver.free_port_outside(*outside, address=address)
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", address, "--save", "", "--appendonly", "no",
         "--protected-mode", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(host=address, port=port)
    if not redis_answers(proc, client):
        pytest.fail("redis-server did not answer within 10 s")
    try:
        yield OwnRedis(address, port, client)
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=10)
