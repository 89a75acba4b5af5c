"""Issue 38: why a pool run was slower, from samples PgBouncer gave during real runs (golden
inputs: a pool of 2 for 10 clients recorded by the executor, and SHOW POOLS of a pool of 20 for
40 clients from the reference output)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from django.utils import translation

from benchmarks.lib.pooler_load import PoolerSample, clearly_slower, slowdown_reasons, summarize
from panel.pools.lib.admin_console import parse_show_pools, pool_totals

FIXTURES = Path(__file__).parent / "fixtures" / "pgbouncer"
RECORDED = json.loads((FIXTURES / "pool2_c10_sleep10ms.pooler.json").read_text())


def recorded_samples() -> list[PoolerSample]:
    return [PoolerSample.from_json(row) for row in RECORDED["pooler"]["samples"]]


def pooler(samples: list[PoolerSample], size: int, clients: int) -> dict:
    return {"pool_size": size, "clients": clients, "summary": summarize(samples)}


def assert_says(reason: object, english: str, german_start: str) -> None:
    """The reason word for word in English, and how its German begins."""
    assert str(reason) == english
    with translation.override("de"):
        assert str(reason).startswith(german_start)


def test_a_pool_of_2_for_10_clients_is_slower_because_clients_waited() -> None:
    assert clearly_slower(RECORDED["tps"], RECORDED["direct_tps"])
    assert summarize(recorded_samples()) == RECORDED["pooler"]["summary"]

    reasons = slowdown_reasons(RECORDED["pooler"])

    assert [reason.code for reason in reasons] == ["pooler.clients_waiting"]
    assert_says(
        reasons[0],
        "Clients waited for a server: the pool has 2 server connections for 10 clients, so on average "
        "8.0 clients were waiting (at most 8, the longest wait 0.07 s; in 100 % of the samples).",
        "Clients warteten auf einen Server: Der Pool hat 2 Serververbindungen für 10 Clients, "
        "daher warteten im Mittel 8,0 Clients",
    )


def test_show_pools_of_a_pool_of_20_under_40_clients_names_the_waiting() -> None:
    lines = (FIXTURES / "show_pools_under_load.txt").read_text().splitlines()[1:]
    columns = lines[0].split("|")
    rows = [tuple(line.split("|")) for line in lines[1:]]
    totals = pool_totals(parse_show_pools(columns, rows))["pool20"]
    sample = PoolerSample(
        1.0, totals.cl_active, totals.cl_waiting, totals.maxwait, totals.servers_active, 40.0
    )

    reasons = slowdown_reasons(pooler([sample, replace(sample, elapsed_s=2.0)], 20, 40))

    assert [reason.code for reason in reasons] == ["pooler.clients_waiting"]
    assert "the pool has 20 server connections for 40 clients" in str(reasons[0])
    assert "on average 19.0 clients were waiting (at most 19, the longest wait 0.01 s" in str(reasons[0])


def test_a_pooler_near_a_full_core_is_named_as_the_limit() -> None:
    busy = [
        replace(s, cl_waiting=0, maxwait_s=0.0, cpu_percent=cpu)
        for s, cpu in zip(recorded_samples(), [93, 97, 99, 96], strict=True)
    ]

    reasons = slowdown_reasons(pooler(busy, 20, 10))

    assert [reason.code for reason in reasons] == ["pooler.cpu_bound"]
    assert_says(
        reasons[0],
        "PgBouncer was busy: it used 96 % of a CPU core on average (at most 99 %). It runs on one "
        "core, so the pooler itself was the limit.",
        "PgBouncer war ausgelastet: Er nutzte im Mittel 96 % eines CPU-Kerns",
    )


def test_nothing_is_said_without_a_cause_in_the_samples() -> None:
    # Waiting in one sample of four is a blip, and 40 % of a core is no limit.
    calm = [replace(s, cl_waiting=0, cpu_percent=40.0) for s in recorded_samples()]
    calm[1] = replace(calm[1], cl_waiting=3)
    assert slowdown_reasons(pooler(calm, 20, 10)) == []
    assert slowdown_reasons({}) == [] and summarize([]) == {}
    # Unreadable CPU is no cause either.
    assert "cpu_bound" not in str(
        slowdown_reasons(pooler([replace(s, cpu_percent=None) for s in calm], 2, 10))
    )


def test_clearly_slower_means_below_four_fifths_of_the_direct_tps() -> None:
    assert clearly_slower(79.0, 100.0) and not clearly_slower(81.0, 100.0)
    assert (
        not clearly_slower(None, 100.0) and not clearly_slower(50.0, None) and not clearly_slower(50.0, 0.0)
    )
