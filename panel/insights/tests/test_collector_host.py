"""The collector's host figures: memory of the cluster's process tree, shared memory counted once."""

from __future__ import annotations

from contextlib import ExitStack
from typing import NamedTuple

import psutil
import pytest

from panel.clusters.engine import postgres
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client
from panel.insights import services
from panel.insights.engine import collector

MB = 1024 * 1024


class Info(NamedTuple):
    rss: int
    shared: int


def test_it_counts_private_memory_of_each_process_and_the_largest_shared_set_once() -> None:
    infos = [
        Info(rss=150 * MB, shared=140 * MB),
        Info(rss=30 * MB, shared=25 * MB),
        Info(rss=12 * MB, shared=0),
    ]
    assert collector.tree_memory(infos) == (10 + 5 + 12) * MB + 140 * MB


def test_a_hundred_backends_sharing_buffers_add_only_their_private_memory() -> None:
    postmaster = Info(rss=40 * MB, shared=30 * MB)
    backends = [Info(rss=130 * MB, shared=128 * MB)] * 100
    naive = sum(i.rss for i in [postmaster, *backends])
    memory = collector.tree_memory([postmaster, *backends])
    assert memory == 10 * MB + 100 * 2 * MB + 128 * MB
    assert naive > 30 * memory


def test_a_process_with_no_shared_memory_counts_whole() -> None:
    assert collector.tree_memory([Info(rss=7 * MB, shared=0)]) == 7 * MB


def test_an_empty_tree_is_zero() -> None:
    assert collector.tree_memory([]) == 0


def test_shared_above_rss_never_subtracts() -> None:
    assert (
        collector.tree_memory([Info(rss=5 * MB, shared=8 * MB), Info(rss=3 * MB, shared=1 * MB)])
        == 2 * MB + 8 * MB
    )


def test_it_accepts_psutil_memory_info() -> None:
    info = psutil.Process().memory_info()
    assert collector.tree_memory([info]) == info.rss


def _rss(process: psutil.Process) -> int:
    try:
        return int(process.memory_info().rss)
    except psutil.NoSuchProcess:
        return 0


@pytest.mark.integration
def test_ten_connections_are_counted_without_their_shared_buffers_each_time(local_cluster: Cluster) -> None:
    cluster = local_cluster
    with connect_as_client(cluster, autocommit=True) as conn:
        # About 8 MB: small enough to be read into shared_buffers rather than a scan ring.
        conn.execute(
            "CREATE TABLE filler AS SELECT g, repeat('x', 100) AS pad FROM generate_series(1, 50000) g"
        )
    with ExitStack() as stack:
        for _ in range(10):
            conn = stack.enter_context(connect_as_client(cluster))
            conn.execute("SELECT count(*) FROM filler").fetchone()

        snap = collector.collect(services.target_for(cluster))
        assert snap.up["host"], snap.errors
        memory = {metric: value for metric, _labels, value in snap.gauges}["memory_bytes"]

        pid = postgres.postmaster_pid(cluster.pgdata)
        assert pid is not None
        postmaster = psutil.Process(pid)
        tree = [postmaster, *postmaster.children(recursive=True)]
        assert len(tree) >= 10 + 1
        naive = sum(_rss(p) for p in tree)  # (a backend may end meanwhile: an autovacuum worker)
        own = postmaster.memory_info()

    assert "memory_rss_bytes" not in {metric for metric, _labels, _value in snap.gauges}
    assert memory > 0
    assert memory >= own.rss - own.shared
    assert memory < 0.6 * naive, (memory / MB, naive / MB)


@pytest.mark.integration
def test_the_processes_under_a_postmaster_are_those_psutil_finds(local_cluster: Cluster) -> None:
    """The collector lists a postmaster's processes from /proc/<pid>/task/*/children (one read a
    process, not one of every process on the machine for each cluster): the same set as psutil's
    scan, with connections open and one ending."""
    from panel.insights.engine.sources import host

    assert host._CHILDREN_LISTED  # the kernel lists children here: the fast path is what ran
    pid = postgres.postmaster_pid(local_cluster.pgdata)
    assert pid is not None
    postmaster = psutil.Process(pid)
    with ExitStack() as stack:
        for _ in range(3):
            stack.enter_context(connect_as_client(local_cluster))
        ours = {p.pid for p in host._descendants(postmaster)}
        theirs = {p.pid for p in postmaster.children(recursive=True)}
        # A process may start or end between the two reads (autovacuum): compare what both saw.
        assert len(ours) >= 6 and len(ours ^ theirs) <= 1, (ours, theirs)
