"""The host's figures for a local cluster (psutil): CPU, memory of the server's process tree,
load, disk."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Protocol

import psutil

from panel.clusters.face import postgres
from panel.clusters.models import Cluster
from panel.insights.engine.snapshot import (
    CollectTimeout,
    Snapshot,
)
from panel.insights.lib.metrics import HOST

log = logging.getLogger(__name__)


class MemoryInfo(Protocol):
    """What ``tree_memory`` reads of psutil's ``memory_info()`` (``shared`` exists on Linux)."""

    @property
    def rss(self) -> int: ...

    @property
    def shared(self) -> int: ...


def tree_memory(infos: Iterable[MemoryInfo]) -> int:
    """Bytes resident for a process tree, counting shared memory once.

    Every backend that touched shared_buffers has those pages in its RSS, so a sum of RSS counts
    them once per backend. Here each process adds its private memory (RSS minus shared) and the
    shared set counts once, as the largest any one process holds. PSS would be exact but walks
    page tables, too slow with hundreds of backends; ``shared`` comes with RSS from one read.
    """
    private = 0
    largest_shared = 0
    for info in infos:
        private += max(0, info.rss - info.shared)  # a platform's odd figures must not subtract
        largest_shared = max(largest_shared, info.shared)
    return private + largest_shared


# Linux lists a task's children in /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN);
# psutil's children() instead reads every process's parent, which made a cycle of N clusters read
# N times every process of the machine (at 200 clusters, 75 ms of the collector's CPU a cluster
# against 35 at 20: issue 41).
_CHILDREN_LISTED = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    """Every process under ``process`` (a postmaster's backends and workers), those that exited
    meanwhile left out."""
    if not _CHILDREN_LISTED:
        return process.children(recursive=True)
    found: list[psutil.Process] = []
    parents = [process.pid]
    while parents:
        parent = parents.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except FileNotFoundError:
            continue  # exited meanwhile
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as listed:
                    pids = [int(pid) for pid in listed.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
            for pid in pids:
                try:
                    found.append(psutil.Process(pid))
                except psutil.Error:
                    continue
                parents.append(pid)
    return found


def collect_host(snap: Snapshot, cluster: Cluster) -> None:
    """CPU, memory and disk of the cluster's processes and directory; machine load average."""
    pid = postgres.postmaster_pid(cluster.pgdata)
    if pid is None:
        raise CollectTimeout("the postmaster is not running")
    postmaster = psutil.Process(pid)
    with postmaster.oneshot():
        times = postmaster.cpu_times()
        # Exited backends' CPU moves into the postmaster's children_* fields when it reaps
        # them, so this sum only grows while the postmaster lives: a counter.
        cpu = times.user + times.system + times.children_user + times.children_system
        memory = [postmaster.memory_info()]
    for child in _descendants(postmaster):
        try:
            with child.oneshot():
                ctimes = child.cpu_times()
                info = child.memory_info()
        except psutil.Error:
            continue  # exited meanwhile
        cpu += ctimes.user + ctimes.system
        memory.append(info)
    # Per CPU of the machine, so 100 % means every core busy.
    snap.counter(HOST, "cpu_seconds", "", cpu / (psutil.cpu_count() or 1))
    snap.gauge("memory_bytes", "", tree_memory(memory))
    load1, load5, load15 = os.getloadavg()
    snap.gauge("load1", "", load1)
    snap.gauge("load5", "", load5)
    snap.gauge("load15", "", load15)
    snap.gauge("disk_used_bytes", "", postgres.directory_size(cluster.pgdata))
    snap.gauge("disk_percent", "", psutil.disk_usage(str(cluster.pgdata)).percent)
