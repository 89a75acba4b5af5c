"""The slots of the network-namespace harness (scripts/netns_harness.py): their names and
addresses, what of them exists, claiming one, and removing one's leftovers. Standard library only.

198.18.0.0/24 (the benchmarking range) is cut into sixteen slots of a /28, one harness each: slot
``s`` has the network 198.18.0.(16s)/28, the bridge's root-side address .16s+1 and node ``i``
(1 to 4) at .16s+10+i, so slot 0 is 198.18.0.1 with nodes at .11, .12, .13. A slot's names carry
its prefix (``pgn9``: the bridge ``pgn9-br``, the root-side ends ``pgn9-v1``…, the namespaces
``pgn9-n1``…), all within the 15 characters of an interface name.

A run claims a slot by creating its bridge under a lock file, with its owner (a run token, the
pid and the pid's start time) in the bridge's alias. A slot whose owner is gone is a crashed run's
leftover: every claim removes those of the slots it may take (their processes killed, namespaces
and links deleted) before it takes the first free one. The operator's harness (``operator-…`` as
run token) is never taken for a leftover; ``scripts/netns.py down`` removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def _words(tag: str | None) -> dict[str, str]:
    return dict(word.split("=", 1) for word in (tag or "").split() if "=" in word)


def run_token(tag: str | None) -> str:
    """The run token an owner's tag names ("" for none)."""
    return _words(tag).get("run", "")


def by_operator(tag: str | None) -> bool:
    """Whether the tag is of a harness scripts/netns.py made (``run=operator-…``)."""
    return run_token(tag).startswith(OPERATOR + "-")


def alive(tag: str | None) -> bool:
    """Whether the owner a bridge names still runs (the operator's harness always does)."""
    if tag is None:
        return False
    if by_operator(tag):
        return True
    words = _words(tag)
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
