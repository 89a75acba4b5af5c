"""Why a run through a pool was slower than the direct run beside it, from what PgBouncer showed
while it ran (pure, no Django).

The executor samples the pool once a second (``SHOW POOLS``: clients waiting for a server and the
longest wait) and the PgBouncer process's CPU. Two causes are named, each only when the samples
show it: clients queueing for the pool's few server connections, and PgBouncer itself busy on its
one core (it is single-threaded: near 100 % of a core, the pooler is the limit).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from panel.core.errors import N_, Count, Message

# A pool run below this share of the direct run's TPS is "clearly slower".
SLOWER_SHARE = 0.8
# Clients waited in at least this share of the samples: waiting was the rule, not a blip.
WAITING_SHARE = 0.5
# PgBouncer's CPU, percent of one core, on average over the run: the pooler is saturated.
CPU_BOUND_PERCENT = 85.0


@dataclass(frozen=True)
class PoolerSample:
    """One look at the pool during a run: ``SHOW POOLS`` summed over its users, and PgBouncer's
    CPU since the previous look (percent of one core; None when it could not be read)."""

    elapsed_s: float
    cl_active: int
    cl_waiting: int
    maxwait_s: float
    sv_active: int
    cpu_percent: float | None

    def to_json(self) -> list[Any]:
        return [
            self.elapsed_s,
            self.cl_active,
            self.cl_waiting,
            self.maxwait_s,
            self.sv_active,
            self.cpu_percent,
        ]

    @classmethod
    def from_json(cls, row: Sequence[Any]) -> PoolerSample:
        elapsed, active, waiting, maxwait, servers, cpu = row
        return cls(float(elapsed), int(active), int(waiting), float(maxwait), int(servers), cpu)


def summarize(samples: Sequence[PoolerSample]) -> dict[str, Any]:
    """What the page needs of the samples; {} without any."""
    if not samples:
        return {}
    waiting = [s.cl_waiting for s in samples]
    cpu = [s.cpu_percent for s in samples if s.cpu_percent is not None]
    return {
        "samples": len(samples),
        "waiting_share": round(sum(1 for w in waiting if w > 0) / len(samples), 3),
        "waiting_avg": round(statistics.mean(waiting), 2),
        "waiting_max": max(waiting),
        "maxwait_max_s": round(max(s.maxwait_s for s in samples), 3),
        "servers_max": max(s.sv_active for s in samples),
        "cpu_avg": round(statistics.mean(cpu), 1) if cpu else None,
        "cpu_max": round(max(cpu), 1) if cpu else None,
    }


def clearly_slower(pool_tps: float | None, direct_tps: float | None) -> bool:
    return bool(pool_tps is not None and direct_tps and pool_tps < SLOWER_SHARE * direct_tps)


def slowdown_reasons(pooler: Mapping[str, Any]) -> list[Message]:
    """The causes the samples show, each a sentence with its figures; [] when none applies."""
    summary = pooler.get("summary") or {}
    if not summary:
        return []
    reasons = []
    size, clients = pooler.get("pool_size"), pooler.get("clients")
    if summary["waiting_share"] >= WAITING_SHARE and summary["waiting_max"] > 0:
        params: dict[str, Any] = {
            "waiting": summary["waiting_avg"],
            "most": Count(summary["waiting_max"]),
            "wait": summary["maxwait_max_s"],
            "share": round(100 * summary["waiting_share"]),
        }
        if size and clients and size < clients:
            template = N_(
                "Clients waited for a server: the pool has %(size)s server connections for %(clients)s "
                "clients, so on average %(waiting).1f clients were waiting (at most %(most)s, the longest "
                "wait %(wait).2f s; in %(share)s %% of the samples)."
            )
            params |= {"size": Count(size), "clients": Count(clients)}
        else:
            template = N_(
                "Clients waited for a server: on average %(waiting).1f clients were waiting (at most "
                "%(most)s, the longest wait %(wait).2f s; in %(share)s %% of the samples)."
            )
        reasons.append(Message(template, "pooler.clients_waiting", **params))
    if summary.get("cpu_avg") is not None and summary["cpu_avg"] >= CPU_BOUND_PERCENT:
        reasons.append(
            Message(
                N_(
                    "PgBouncer was busy: it used %(cpu).0f %% of a CPU core on average (at most "
                    "%(most).0f %%). It runs on one core, so the pooler itself was the limit."
                ),
                "pooler.cpu_bound",
                cpu=summary["cpu_avg"],
                most=summary["cpu_max"],
            )
        )
    return reasons
