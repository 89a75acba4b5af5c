"""Plan limits on the node: each cluster's processes in a cgroup of their own (issue 13, item 3).

The plan's RAM is the group's memory limit and its vCPUs the CPU quota (a 1 GB, 1 vCPU cluster
can use 1 GiB and one core's worth of time, whatever its load), and the clusters' parent group
has a lower CPU weight than the rest, so tenant load does not starve the panel's own processes.

Groups are made under the cgroup the panel itself runs in (as systemd delegates a slice), one
per cluster: ``<own group>/pgpanel-clusters/<cluster id>``. cgroup v2 (one hierarchy with
``cgroup.controllers``) and v1 (one hierarchy per controller, ``memory`` and ``cpu``) are both
handled. Where neither can be written (not root, a read-only /sys/fs/cgroup) clusters start all
the same, and the panel says once, in its log, that limits are not enforced.

Only this module writes under /sys/fs/cgroup; processes join a group through
``panel.core.runas.run_as(join=…)`` (panel/core/cgexec.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path("/sys/fs/cgroup")
PARENT = "pgpanel-clusters"
# The load generators' group (pgbench, sysbench), one per node, beside the clusters' parent: the
# client of a benchmark is off every server's plan, as on another machine.
CLIENTS = "pgpanel-clients"
PERIOD_US = 100_000
# The clusters' share of CPU time under contention, against 1024 (v1) / 100 (v2) for every other
# group at that level: the panel's processes (web, agent, workers) win when both want the CPU.
V1_SHARES = 256
V2_WEIGHT = 25
# The clients' weight: below one panel process (1024 / 100), above the clusters' parent, so a
# client keeps up with the server it measures while the panel's pages still win.
CLIENTS_V1_SHARES = 512
CLIENTS_V2_WEIGHT = 50

_warned = False


@dataclass(frozen=True)
class Limits:
    memory_bytes: int
    vcpus: float


@dataclass(frozen=True)
class Group:
    """One cluster's group: the directories written (one per v1 controller, or one in v2)."""

    version: int
    paths: tuple[Path, ...]

    @property
    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.paths]


def _own_path(controller: str) -> str:
    """This process's group in ``controller``'s v1 hierarchy, or in v2 (controller "")."""
    return group_of(os.getpid(), controller).lstrip("/")


def version() -> int | None:
    """2 on a unified hierarchy, 1 with writable v1 memory and cpu controllers, else None."""
    if os.geteuid() != 0:
        return None
    if (ROOT / "cgroup.controllers").exists():
        return 2
    if (ROOT / "memory").is_dir() and (ROOT / "cpu").is_dir():
        return 1
    return None


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _base(controller: str) -> Path:
    return ROOT / controller / _own_path(controller) / PARENT if controller else ROOT / _own_path("") / PARENT


def _ensure_v1(name: str, limits: Limits) -> Group:
    memory, cpu = _base("memory"), _base("cpu")
    for parent in (memory, cpu):
        parent.mkdir(exist_ok=True)
    _write(cpu / "cpu.shares", str(V1_SHARES))
    memory_group, cpu_group = memory / name, cpu / name
    memory_group.mkdir(exist_ok=True)
    cpu_group.mkdir(exist_ok=True)
    _write(memory_group / "memory.limit_in_bytes", str(limits.memory_bytes))
    _write(cpu_group / "cpu.cfs_period_us", str(PERIOD_US))
    _write(cpu_group / "cpu.cfs_quota_us", str(int(limits.vcpus * PERIOD_US)))
    return Group(1, (memory_group, cpu_group))


def _ensure_v2(name: str, limits: Limits) -> Group:
    parent = _base("")
    parent.mkdir(exist_ok=True)
    # Controllers reach a child only through every ancestor's subtree_control.
    for directory in (parent.parent, parent):
        _write(directory / "cgroup.subtree_control", "+memory +cpu")
    _write(parent / "cpu.weight", str(V2_WEIGHT))
    group = parent / name
    group.mkdir(exist_ok=True)
    _write(group / "memory.max", str(limits.memory_bytes))
    _write(group / "cpu.max", f"{int(limits.vcpus * PERIOD_US)} {PERIOD_US}")
    return Group(2, (group,))


def _ensure_clients_v1(memory_bytes: int) -> Group:
    memory, cpu = ROOT / "memory" / _own_path("memory") / CLIENTS, ROOT / "cpu" / _own_path("cpu") / CLIENTS
    memory.mkdir(exist_ok=True)
    cpu.mkdir(exist_ok=True)
    _write(memory / "memory.limit_in_bytes", str(memory_bytes))
    _write(cpu / "cpu.shares", str(CLIENTS_V1_SHARES))
    _write(cpu / "cpu.cfs_quota_us", "-1")
    return Group(1, (memory, cpu))


def _ensure_clients_v2(memory_bytes: int) -> Group:
    own = ROOT / _own_path("")
    _write(own / "cgroup.subtree_control", "+memory +cpu")
    group = own / CLIENTS
    group.mkdir(exist_ok=True)
    _write(group / "memory.max", str(memory_bytes))
    _write(group / "cpu.weight", str(CLIENTS_V2_WEIGHT))
    _write(group / "cpu.max", f"max {PERIOD_US}")
    return Group(2, (group,))


def ensure_clients(memory_bytes: int) -> Group | None:
    """The node's clients' group (``CLIENTS``): ``memory_bytes`` of memory, no CPU quota, a CPU
    weight below the panel's processes; None when cgroups cannot be written here."""
    return _ensure(lambda kind: (_ensure_clients_v1 if kind == 1 else _ensure_clients_v2)(memory_bytes))


def ensure(name: str, limits: Limits) -> Group | None:
    """The group ``name`` with ``limits`` (made or updated); None when cgroups cannot be written
    here, said once per process."""
    return _ensure(lambda kind: (_ensure_v1 if kind == 1 else _ensure_v2)(name, limits))


def _ensure(make: Callable[[int], Group]) -> Group | None:
    global _warned
    kind = version()
    try:
        if kind is not None:
            return make(kind)
        reason = "the panel does not run as root" if os.geteuid() != 0 else "no cgroup hierarchy is mounted"
    except OSError as exc:
        reason = f"{exc.filename}: {exc.strerror}"
    if not _warned:
        _warned = True
        log.warning(
            "Plan limits are not enforced on this node (%s): clusters may use all the machine's "
            "memory and CPU. Run the node agent as root on a machine with cgroups v1 or v2.",
            reason,
        )
    return None


def find(name: str) -> Group | None:
    """The group ``name`` if it exists (to read its limits or remove it)."""
    kind = version()
    if kind == 1:
        paths = tuple(path for path in (_base("memory") / name, _base("cpu") / name) if path.is_dir())
        return Group(1, paths) if paths else None
    if kind == 2:
        path = _base("") / name
        return Group(2, (path,)) if path.is_dir() else None
    return None


def remove(name: str) -> None:
    """Remove the group once its processes are gone (rmdir of an empty cgroup); never raises."""
    group = find(name)
    if group is None:
        return
    for path in group.paths:
        try:
            path.rmdir()
        except OSError as exc:
            log.warning("could not remove the cgroup %s: %s", path, exc.strerror)


def find_clients() -> Group | None:
    """The clients' group if it exists."""
    kind = version()
    if kind == 1:
        paths = tuple(ROOT / c / _own_path(c) / CLIENTS for c in ("memory", "cpu"))
        return Group(1, paths) if all(path.is_dir() for path in paths) else None
    if kind == 2:
        path = ROOT / _own_path("") / CLIENTS
        return Group(2, (path,)) if path.is_dir() else None
    return None


def cpu_weight(group: Group) -> int:
    """The group's CPU weight: v1 ``cpu.shares`` (against 1024) or v2 ``cpu.weight`` (against 100)."""
    path = group.paths[1] / "cpu.shares" if group.version == 1 else group.paths[0] / "cpu.weight"
    return int(path.read_text().strip())


def has_cpu_quota(group: Group) -> bool:
    if group.version == 1:
        return int((group.paths[1] / "cpu.cfs_quota_us").read_text()) > 0
    return (group.paths[0] / "cpu.max").read_text().split()[0] != "max"


def memory_limit(group: Group) -> int:
    path = group.paths[0] / ("memory.limit_in_bytes" if group.version == 1 else "memory.max")
    return int(path.read_text().strip())


def cpu_quota(group: Group) -> float:
    """The CPU quota in cores."""
    if group.version == 1:
        quota = int((group.paths[1] / "cpu.cfs_quota_us").read_text())
        period = int((group.paths[1] / "cpu.cfs_period_us").read_text())
    else:
        quota_text, period_text = (group.paths[0] / "cpu.max").read_text().split()
        quota, period = int(quota_text), int(period_text)
    return quota / period


def group_of(pid: int, controller: str = "memory") -> str:
    """The group path of process ``pid`` in ``controller`` (v1) or in v2 ("")."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if (controller == "" and _id == "0") or controller in controllers.split(","):
            return path
    return ""


def contains(group_dir: Path, pid: int) -> bool:
    try:
        return str(pid) in (group_dir / "cgroup.procs").read_text().split()
    except OSError:
        return False


def add_processes(procs_files: list[Path], pids: list[int]) -> None:
    """Move running processes into a group (one pid per write, as the kernel wants); a process
    that exited meanwhile is skipped."""
    for procs in procs_files:
        for pid in pids:
            try:
                procs.write_text(str(pid))
            except ProcessLookupError:
                continue


def own_procs_files() -> list[Path]:
    """The ``cgroup.procs`` files of the panel's own groups (the parents of the clusters' groups)."""
    kind = version()
    if kind == 1:
        return [ROOT / c / _own_path(c) / "cgroup.procs" for c in ("memory", "cpu")]
    if kind == 2:
        return [ROOT / _own_path("") / "cgroup.procs"]
    return []
