"""Nodes with addresses of their own on one machine (issue 39): Linux network namespaces, one per
node, joined by a bridge in the root namespace. Used by the tests (tests/fixtures/netns.py) and by
operators (scripts/netns.py); run as root. Standard library only, so both can load it by path.

Addresses come from 198.18.0.0/24 (the benchmarking range), cut into sixteen slots of a /28, one
harness each: slot ``s`` has the network 198.18.0.(16s)/28, the bridge's root-side address .16s+1
and node ``i`` (1 to 4) at .16s+10+i, so slot 0 is 198.18.0.1 with nodes at .11, .12, .13. Each
namespace has loopback and its one address, and no other route: nothing in it reaches anything
but its slot's /28 (the root side and the other nodes) and its own loopback; another slot's
address or any other address fails at once with "network unreachable", before a packet is made.
IPv6 is off in the namespaces and on the harness's root-side links.

A harness's names carry its slot's prefix (``pgn9``: the bridge ``pgn9-br``, the root-side ends
``pgn9-v1``…, the namespaces ``pgn9-n1``…; the node's end is ``eth0`` inside its namespace). A run
claims a slot by creating its bridge under a lock file, with its owner (a run token, pid and the
pid's start time) in the bridge's alias. A slot whose owner is gone is a crashed run's leftover:
every claim removes those of the slots it may take (their processes killed, namespaces and links
deleted) before it takes the first free one. The operator's harness (``operator`` as owner) is
never taken for a leftover; ``scripts/netns.py down`` removes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

NETWORK = ipaddress.ip_network("198.18.0.0/24")
SLOT_PREFIXLEN = 28
SLOTS = range(16)
MAX_NODES = 4
OPERATOR_SLOT = 0
# The tests' slots: 198.18.0.128/25, clear of what tests/security/ownaddress.py makes up in the
# root namespace (198.18.0.1 on a dummy interface, 198.18.0.64/26 routed nowhere).
TEST_SLOTS = range(8, 16)
MARK = "pgpanel-netns"
OPERATOR = "operator"
LOCK_FILE = (
    Path("/run/lock/pgpanel-netns.lock") if Path("/run/lock").is_dir() else Path("/run/pgpanel-netns.lock")
)
NETNS_DIR = Path("/run/netns")
IP_TIMEOUT = 10.0
CLONE_NEWNET = 0x40000000

T = TypeVar("T")


class HarnessError(RuntimeError):
    """A step of the harness failed (with ``ip``'s words), or no slot was free."""


def _ip_binary() -> str:
    return shutil.which("ip") or "/usr/sbin/ip"


def ip(*args: str, check: bool = True) -> str:
    """``ip`` with an argument list; its output, or a HarnessError with its words."""
    done = subprocess.run([_ip_binary(), *args], capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and done.returncode != 0:
        raise HarnessError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


@dataclass(frozen=True)
class Layout:
    """One slot's names and addresses."""

    slot: int
    nodes: int

    def __post_init__(self) -> None:
        if self.slot not in SLOTS:
            raise ValueError(f"slot {self.slot} is not one of 0 to {len(SLOTS) - 1}")
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValueError(f"a harness has 1 to {MAX_NODES} nodes, not {self.nodes}")

    @property
    def prefix(self) -> str:
        return prefix_of(self.slot)

    @property
    def network(self) -> ipaddress.IPv4Network:
        base = int(NETWORK.network_address) + 16 * self.slot
        return ipaddress.IPv4Network((base, SLOT_PREFIXLEN))

    def _address(self, offset: int) -> str:
        return str(self.network.network_address + offset)

    @property
    def root_address(self) -> str:
        return self._address(1)

    def node_address(self, index: int) -> str:
        return self._address(10 + index)

    @property
    def bridge(self) -> str:
        return f"{self.prefix}-br"

    def veth(self, index: int) -> str:
        return f"{self.prefix}-v{index}"

    def namespace(self, index: int) -> str:
        return f"{self.prefix}-n{index}"


def prefix_of(slot: int) -> str:
    return f"pgn{slot}"


@dataclass(frozen=True)
class Node:
    index: int
    namespace: str
    address: str
    veth: str  # the root-side end; the node's own is eth0 in its namespace


# --- what exists, by prefix ------------------------------------------------------------------------


def namespaces(prefix: str) -> list[str]:
    names = NETNS_DIR.iterdir() if NETNS_DIR.is_dir() else iter(())
    return sorted(p.name for p in names if p.name.startswith(prefix + "-"))


def links(prefix: str) -> list[dict[str, Any]]:
    """The root namespace's links of ``prefix`` (``ip -j link``'s rows)."""
    rows = json.loads(ip("-j", "link", "show") or "[]")
    return [row for row in rows if str(row.get("ifname", "")).startswith(prefix + "-")]


def pids(namespace: str) -> list[int]:
    """Every process in ``namespace`` (``ip netns pids``: those whose network namespace it is)."""
    return [int(word) for word in ip("netns", "pids", namespace, check=False).split()]


def owner(slot: int) -> str | None:
    """The owner written on the slot's bridge; None: no bridge."""
    for row in links(prefix_of(slot)):
        if row["ifname"] == f"{prefix_of(slot)}-br":
            return str(row.get("ifalias", ""))
    return None


def _start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot); None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in "ZX" else fields[19]


def owner_tag(token: str, pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{MARK} run={token} pid={pid} start={_start_time(pid)}"


def alive(tag: str | None) -> bool:
    """Whether the owner a bridge names still runs (the operator's harness always does)."""
    if tag is None:
        return False
    words = dict(word.split("=", 1) for word in tag.split() if "=" in word)
    if words.get("run") == OPERATOR:
        return True
    pid = words.get("pid", "")
    return pid.isdigit() and _start_time(int(pid)) == words.get("start")


def remove(prefix: str) -> None:
    """Everything of ``prefix``: the processes in its namespaces killed (stopped ones too), the
    namespaces deleted, then its links (a veth's deletion takes its peer), the bridge last."""
    for name in namespaces(prefix):
        _kill_all(name)
        ip("netns", "delete", name, check=False)
    for row in sorted(links(prefix), key=lambda row: row["ifname"].endswith("-br")):
        ip("link", "delete", row["ifname"], check=False)
    left = namespaces(prefix) + [row["ifname"] for row in links(prefix)]
    if left:
        raise HarnessError(f"could not remove {', '.join(left)}")


def _kill_all(namespace: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while found := pids(namespace):
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise HarnessError(f"processes {found} in {namespace} outlived SIGKILL")
        time.sleep(0.01)


# --- claiming a slot -------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def claim(nodes: int, slots: Iterable[int], tag: str) -> Layout:
    """The first free slot of ``slots``, its bridge made with ``tag`` as owner; every slot of
    ``slots`` a crashed run left behind is removed first."""
    with _locked():
        free = []
        for slot in slots:
            tag_now = owner(slot)
            if alive(tag_now):
                continue
            remove(prefix_of(slot))  # a crashed run's leftovers, or nothing
            free.append(slot)
        if not free:
            raise HarnessError(f"no free slot among {list(slots)}: every one is held by a running harness")
        layout = Layout(free[0], nodes)
        ip("link", "add", layout.bridge, "type", "bridge", "forward_delay", "0")
        try:
            ip("link", "set", layout.bridge, "alias", tag)
        except HarnessError:
            ip("link", "delete", layout.bridge, check=False)
            raise
    return layout


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
                self._in_namespace(node, lambda key=key: _no_ipv6(key))
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
        """``argv`` started in the node's namespace (``ip netns exec`` execs it: same pid)."""
        child = subprocess.Popen(self.command(node, argv), **kwargs)
        self.children.append(child)
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

    def socket(self, node: Node) -> socket.socket:
        """A TCP socket of the node's namespace."""
        return self._in_namespace(node, lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))

    def connect(self, node: Node, host: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection from the node to ``host:port``; OSError when it fails."""
        sock = self.socket(node)
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
            if all(_stopped(pid) for pid in found) and set(self.pids(node)) <= set(found):
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


def _stopped(pid: int) -> bool:
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


def remains(prefix: str, token: str) -> list[str]:
    """What of the run ``token`` still exists under ``prefix`` (another run may hold the slot
    since): its bridge, its root-side links, its namespaces (by their eth0's alias)."""
    found = []
    for row in links(prefix):
        if token in str(row.get("ifalias", "")):
            found.append(row["ifname"])
    for name in namespaces(prefix):
        rows = json.loads(ip("-n", name, "-j", "link", "show", "eth0", check=False) or "[]")
        if any(row.get("ifalias") == token for row in rows):
            found.append(name)
    return found
