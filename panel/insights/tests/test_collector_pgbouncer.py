"""The collector's PgBouncer reads: over ``console.connect``, within the cluster's budget."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.engine import collector
from panel.pools import services as pool_services
from panel.pools.engine import console, disk, supervisor
from panel.pools.lib.admin_console import PoolRow


@pytest.mark.parametrize(
    ("seconds", "expected"), [(-1, 2), (0, 2), (0.3, 2), (1, 2), (2, 2), (2.1, 3), (4, 4), (4.5, 5), (30, 30)]
)
def test_the_console_connect_timeout_is_whole_seconds_rounded_up_and_at_least_two(
    seconds: float, expected: int
) -> None:
    assert console.connect_timeout_seconds(seconds) == expected


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    pool_services.create_pool(shared_local_cluster, "test-pool", "defaultdb", "", "transaction", 2)
    yield shared_local_cluster
    pool_services.stop_pgbouncer(shared_local_cluster)


def gauges(snap: collector.Snapshot) -> dict[tuple[str, str], float]:
    return {(metric, labels): value for metric, labels, value in snap.gauges}


@pytest.mark.integration
@pytest.mark.parametrize("budget", [collector.BUDGET_SECONDS, 2.5])
def test_a_pgbouncer_that_does_not_answer_is_a_gap_within_the_budget(cluster: Cluster, budget: float) -> None:
    target = services.target_for(cluster)
    answered = collector.collect(target, budget=budget)
    assert answered.up == {"postgres": True, "host": True, "pgbouncer": True}, answered.errors
    assert gauges(answered)[("pool_size", "pool=test-pool")] == 2

    pid = supervisor.running_pid(disk.bouncer_files(cluster))
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        snap = collector.collect(target, budget=budget)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)

    assert snap.up == {"postgres": True, "host": True, "pgbouncer": False}
    assert "timeout" in snap.errors["pgbouncer"], snap.errors
    # libpq waits whole seconds for a connect, at least MIN_CONNECT_TIMEOUT (2 s) even when less of
    # the budget is left (a run saw 3.1 s of a 2.5 s budget: 1.1 s went before PgBouncer's turn):
    # past the budget by that floor at most, with a second of a loaded machine's slack; never hung.
    assert took < budget + console.MIN_CONNECT_TIMEOUT + 1
    figures = gauges(snap)
    assert ("conn_total", "") in figures and ("memory_bytes", "") in figures
    assert not [metric for metric, _labels in figures if metric.startswith("pool_")]

    again = collector.collect(target, budget=budget)
    assert again.up["pgbouncer"] is True, again.errors


@pytest.mark.integration
def test_a_pgbouncer_refusing_the_console_is_a_gap_with_its_message(cluster: Cluster) -> None:
    target = services.target_for(cluster)
    assert target.pooler is not None
    target.pooler.admin_password = "not-the-password"  # in memory only: the row keeps the real one
    snap = collector.collect(target)
    assert snap.up == {"postgres": True, "host": True, "pgbouncer": False}
    assert "authentication failed" in snap.errors["pgbouncer"], snap.errors


@pytest.mark.integration
def test_a_pgbouncer_that_stops_answering_after_the_connect_is_given_up_at_the_deadline(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = supervisor.running_pid(disk.bouncer_files(cluster))
    assert pid is not None
    show_pools = console.show_pools

    def stop_then_show(conn: console.Connection) -> list[PoolRow]:
        os.kill(pid, signal.SIGSTOP)
        return show_pools(conn)

    monkeypatch.setattr(console, "show_pools", stop_then_show)
    try:
        started = time.monotonic()
        snap = collector.collect(services.target_for(cluster), budget=2.0)
        took = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert snap.up == {"postgres": True, "host": True, "pgbouncer": False}
    assert snap.errors["pgbouncer"].startswith("no answer within"), snap.errors
    assert took < 6  # the 2 s budget kept (a stopped PgBouncer never answers), with a loaded machine's slack
