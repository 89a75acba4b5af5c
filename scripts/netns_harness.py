"""Nodes with addresses of their own on one machine (issue 39): Linux network namespaces, one per
node, joined by a bridge in the root namespace. Used by the tests (tests/fixtures/netns.py) and by
operators (scripts/netns.py); run as root. Standard library only, so both can load it by path.

A harness takes a slot of 198.18.0.0/24 (a /28: the bridge's root side at its .1, node ``i`` at
its .10+i; scripts/netns_slots.py) and makes one namespace per node, a veth pair from each onto
the bridge. Each namespace has loopback and its one address, and no other route: nothing in it
reaches anything but its slot's /28 (the root side and the other nodes) and its own loopback;
another slot's address or any other address fails at once with "network unreachable", before a
packet is made. IPv6 is off in the namespaces and on the harness's root-side links. It removes
what it made on the way out (its processes killed first), an exception included; a crashed run's
leftovers go at the next claim of their slot.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))  # netns_slots, also when loaded by path

from netns_slots import (  # noqa: E402
    IP_TIMEOUT,
    MARK,
    NETNS_DIR,
    NETWORK,
    OPERATOR,
    OPERATOR_SLOT,
    SLOTS,
    TEST_SLOTS,
    HarnessError,
    Layout,
    _ip_binary,
    _locked,
    _start_time,
    alive,
    by_operator,
    claim,
    ip,
    links,
    namespaces,
    owner,
    owner_tag,
    pids,
    prefix_of,
    remains,
    remove,
    run_token,
)

__all__ = [
    "NETWORK",
    "OPERATOR",
    "OPERATOR_SLOT",
    "SLOTS",
    "TEST_SLOTS",
    "Harness",
    "HarnessError",
    "Layout",
    "Node",
    "_locked",
    "_start_time",
    "alive",
    "by_operator",
    "existing",
    "operator_up",
    "claim",
    "harness",
    "ip",
    "links",
    "namespaces",
    "owner",
    "owner_tag",
    "pids",
    "prefix_of",
    "remains",
    "remove",
    "run_token",
    "stopped",
]

CLONE_NEWNET = 0x40000000
T = TypeVar("T")


@dataclass(frozen=True)
class Node:
    index: int
    namespace: str
    address: str
    veth: str  # the root-side end; the node's own is eth0 in its namespace


# --- one harness -----------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _no_ipv6(interface: str) -> None:
    Path(f"/proc/sys/net/ipv6/conf/{interface}/disable_ipv6").write_text("1")


@dataclass
class Harness:
    """The nodes of one claimed slot and what the tests do to them."""

    layout: Layout
    token: str
    nodes: list[Node] = field(default_factory=list)
    children: list[subprocess.Popen[Any]] = field(default_factory=list)

    def build(self) -> None:
        """The bridge up with the root-side address; per node a namespace with loopback up, IPv6
        off, a veth pair onto the bridge and the node's address. No route but the slot's."""
        layout = self.layout
        network = layout.network.prefixlen
        _no_ipv6(layout.bridge)
        ip("addr", "add", f"{layout.root_address}/{network}", "dev", layout.bridge)
        ip("link", "set", layout.bridge, "up")
        for index in range(1, layout.nodes + 1):
            node = Node(index, layout.namespace(index), layout.node_address(index), layout.veth(index))
            ip("netns", "add", node.namespace)
            self.nodes.append(node)
            for key in ("all", "default"):
                self._in_namespace(node, functools.partial(_no_ipv6, key))
            ip("link", "add", node.veth, "type", "veth", "peer", "name", "eth0", "netns", node.namespace)
            ip("link", "set", node.veth, "alias", self.token)
            _no_ipv6(node.veth)
            ip("link", "set", node.veth, "master", layout.bridge, "up")
            ip("-n", node.namespace, "link", "set", "eth0", "alias", self.token)
            ip("-n", node.namespace, "addr", "add", f"{node.address}/{network}", "dev", "eth0")
            ip("-n", node.namespace, "link", "set", "lo", "up")
            ip("-n", node.namespace, "link", "set", "eth0", "up")

    def close(self) -> None:
        """Everything removed (the processes in the namespaces first), the children reaped."""
        try:
            for child in self.children:  # also one that has not entered its namespace yet
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
            remove(self.layout.prefix)
        finally:
            for child in self.children:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=IP_TIMEOUT)

    def node(self, index: int) -> Node:
        return self.nodes[index - 1]

    # --- processes --------------------------------------------------------------------------------

    def command(self, node: Node, argv: Sequence[str]) -> list[str]:
        return [_ip_binary(), "netns", "exec", node.namespace, *argv]

    def popen(self, node: Node, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """``argv`` started in the node's namespace (``ip netns exec`` execs it: same pid),
        returned once it is in there (so a freeze right after finds it) or has ended."""
        child = subprocess.Popen(self.command(node, argv), **kwargs)
        self.children.append(child)
        inside = os.stat(NETNS_DIR / node.namespace).st_ino
        deadline = time.monotonic() + IP_TIMEOUT
        while child.poll() is None and _net_namespace(child.pid) != inside:
            if time.monotonic() > deadline:
                raise HarnessError(f"{argv[0]} did not enter {node.namespace} within {IP_TIMEOUT} s")
            time.sleep(0.002)
        return child

    def run(
        self, node: Node, argv: Sequence[str], *, timeout: float = 30, **kwargs: Any
    ) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(node, argv), timeout=timeout, **kwargs)

    def pids(self, node: Node) -> list[int]:
        return pids(node.namespace)

    def _in_namespace(self, node: Node, work: Callable[[], T]) -> T:
        """``work`` run by a thread that entered the node's namespace (and then ends, so this
        process stays outside); a socket it makes belongs to the namespace for good."""
        result: dict[str, Any] = {}

        def enter_and_work() -> None:
            try:
                fd = os.open(NETNS_DIR / node.namespace, os.O_RDONLY)
                try:
                    if _libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns into {node.namespace}")
                finally:
                    os.close(fd)
                result["value"] = work()
            except BaseException as exc:  # handed to the caller's thread
                result["error"] = exc

        thread = threading.Thread(target=enter_and_work, name=f"netns-{node.namespace}")
        thread.start()
        thread.join()
        if "error" in result:
            raise result["error"]
        return result["value"]  # type: ignore[no-any-return]

    def tcp_socket(self, node: Node) -> socket.socket:
        """A TCP socket of the node's namespace."""
        return self._in_namespace(node, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))

    def connect(self, node: Node, host: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection from the node to ``host:port``; OSError when it fails."""
        sock = self.tcp_socket(node)
        sock.settimeout(timeout)
        try:
            sock.connect((host, port))
        except OSError:
            sock.close()
            raise
        return sock

    def tx_packets(self, node: Node) -> int:
        """Packets the node's eth0 has sent."""
        rows = json.loads(ip("-n", node.namespace, "-j", "-s", "link", "show", "eth0"))
        return int(rows[0]["stats64"]["tx"]["packets"])

    # --- a node lost: frozen, or its link down ----------------------------------------------------

    def freeze(self, node: Node, timeout: float = 10.0) -> list[int]:
        """SIGSTOP to every process in the node's namespace, until all are stopped and no new one
        appeared; the pids stopped."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.pids(node)
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
            if all(stopped(pid) for pid in found) and set(self.pids(node)) <= set(found):
                return found
            if time.monotonic() > deadline:
                raise HarnessError(f"{node.namespace}: not every process stopped within {timeout} s")
            time.sleep(0.005)

    def thaw(self, node: Node) -> None:
        for pid in self.pids(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def link_down(self, node: Node) -> None:
        """The node's cable pulled: its root-side end down (its own eth0 loses carrier)."""
        ip("link", "set", node.veth, "down")

    def link_up(self, node: Node) -> None:
        ip("link", "set", node.veth, "up")


def _net_namespace(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone
    return stat.rsplit(")", 1)[1].split()[0] in "TtZX"


@contextlib.contextmanager
def harness(nodes: int = 3, slots: Iterable[int] = TEST_SLOTS) -> Iterator[Harness]:
    """A harness of ``nodes`` nodes in the first free slot of ``slots``, removed on the way out
    (an exception in its body or in its own setup included)."""
    if os.geteuid() != 0:
        raise HarnessError("network namespaces need root")
    token = secrets.token_hex(6)
    made = Harness(claim(nodes, list(slots), owner_tag(token)), token)
    try:
        made.build()
        yield made
    finally:
        made.close()


def operator_up(nodes: int, slot: int = OPERATOR_SLOT) -> Harness:
    """The operator's harness in ``slot``, left up (``down`` removes it); a failed step removes
    what it made."""
    token = f"{OPERATOR}-{secrets.token_hex(6)}"
    made = Harness(claim(nodes, [slot], f"{MARK} run={token}"), token)
    try:
        made.build()
    except BaseException:
        made.close()
        raise
    return made


def existing(slot: int) -> Harness | None:
    """The harness now in ``slot`` (any owner's), to act on its nodes; None: there is none."""
    prefix = prefix_of(slot)
    indexes = sorted(
        int(name.rsplit("-n", 1)[1]) for name in namespaces(prefix) if name[len(prefix) :][:2] == "-n"
    )
    if not indexes:
        return None
    layout = Layout(slot, max(indexes))
    made = Harness(layout, run_token(owner(slot)))
    made.nodes = [Node(i, layout.namespace(i), layout.node_address(i), layout.veth(i)) for i in indexes]
    return made
