"""``failover.py --scenarios machine-loss``: a whole machine lost, on nodes with addresses of their
own (issue 39). Run as root from a checkout after ``make test`` (the namespace harness, the panel's
node agents in three namespaces: tests/fixtures/nsnodes.py's ``running_nodes``, built here and
removed on the way out, a failure included).

Each trial loses the cluster's own node (its primary moved there first; tests/machine_loss.py)
while three writers commit: through the cluster's multi-host URI, a pool's, the floating address.
Odd trials freeze the node (the first with the panel's etcd leader moved onto it), even ones take
its link down with a client inside it writing to the old primary. A line per trial; last, over the
trials: ``machine-loss: first write <median> s median, <worst> s worst; lost <n> of <acked>;
unknown <k>`` (per trial the slowest writer's first write).
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:5.2f}"


def run(trials: int) -> None:
    from django.contrib.auth.models import User

    from tests import machine_loss
    from tests.fixtures.nsnodes import data_root, running_nodes

    results: list[machine_loss.Loss] = []
    with running_nodes(data_root()) as nsnodes, tempfile.TemporaryDirectory() as scratch:
        owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
        setup = machine_loss.prepare(nsnodes, owner)
        print(f"three members on three nodes, floating address {setup.floating}", flush=True)
        for number in range(1, trials + 1):
            kind = "freeze" if number % 2 else "link-down"
            log = Path(scratch) / f"isolated-{number}.log"
            loss = machine_loss.lose(nsnodes, setup, kind, log, etcd_leader_there=number == 1)
            results.append(loss)
            writes = ", ".join(f"{name} {_seconds(t)} s" for name, t in loss.first_write.items())
            split = (
                ""
                if loss.split_brain is None
                else (
                    f"; isolated client: {loss.split_brain} acknowledged after the new primary's first write, "
                    f"{loss.isolated_after_loss} after the loss"
                )
            )
            print(
                f"machine-loss #{number} ({kind}{', etcd leader there' if loss.etcd_leader_was_there else ''}): "
                f"first write {writes}; lost {loss.lost} of {loss.acked}; unknown {loss.unknown}{split}; "
                f"{loss.new_primary} took over; back, streaming again after {loss.streaming_again:.1f} s; "
                f"etcd elections {loss.etcd_elections}",
                flush=True,
            )
    print()
    for name in machine_loss.WRITERS:
        times = [r.first_write[name] for r in results]
        known = [t for t in times if t is not None]
        if known:
            print(
                f"  {name}: first write median {statistics.median(known):.2f} s, worst {max(known):.2f} s"
                + (f" ({len(times) - len(known)} never)" if len(known) < len(times) else "")
            )
    rejoin = [r.streaming_again for r in results]
    print(f"  back → streaming again: median {statistics.median(rejoin):.1f} s, worst {max(rejoin):.1f} s")
    split = [r.split_brain for r in results if r.split_brain is not None]
    print(f"  split-brain commits (link-down trials): {sum(split)} in {len(split)} trials")
    slowest = [r.slowest for r in results]
    print(
        f"machine-loss: first write {statistics.median(slowest):.2f} s median, {max(slowest):.2f} s worst; "
        f"lost {sum(r.lost for r in results)} of {sum(r.acked for r in results)}; "
        f"unknown {sum(r.unknown for r in results)}"
    )
