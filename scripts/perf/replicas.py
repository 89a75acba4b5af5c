"""Read-only replicas' figures for the closing note, on one throw-away cluster in one run:

- the time to make a replica (``replica_build``: pg_basebackup, start, streaming) of a pgbench
  database at ``--scale``;
- how far it lags while a ``--duration`` s tpcb-like pgbench run writes on the source (bytes and
  seconds, from the source's pg_stat_replication every 0.5 s: median and worst), and the time
  until it has replayed everything once the run ends;
- the time to promote it.

    .venv/bin/python scripts/perf/replicas.py [--scale 20] [--duration 20]

Not part of `make test`. Compare within a run (the machine is shared).
"""

from __future__ import annotations

import statistics
import threading
import time

from _bench_setup import bench_cluster
from _bench_setup import by_hand as hand_run
from _cli import counts_parser


def main() -> None:
    args = counts_parser(__doc__, scale=20, duration=20).parse_args()

    with bench_cluster("perf-replica-source", args.scale) as bench:
        from benchmarks.lib.run_options import RunOptions
        from panel.clusters import services
        from panel.clusters.replicas.services import replicas, streaming

        source = bench.cluster
        started = time.monotonic()
        replica = replicas.add_replica(source, name="perf-replica")
        made = time.monotonic() - started
        print(f"replica of a scale-{args.scale} database made in {made:.1f} s (port {replica.port})")
        slot = streaming.slot_name(replica)
        samples: list[tuple[int, float]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                lag = streaming.replica_lag(source).get(slot)
                if lag is not None and lag.lag_bytes is not None:
                    samples.append((lag.lag_bytes, lag.replay_lag_seconds or 0.0))
                time.sleep(0.5)

        watcher = threading.Thread(target=sample)
        watcher.start()
        options = RunOptions(clients=8, threads=2, duration_s=args.duration)
        tps = hand_run(bench, options)
        ended = time.monotonic()
        while (lag := streaming.replica_lag(source).get(slot)) is not None and lag.lag_bytes:
            time.sleep(0.1)
        caught_up = time.monotonic() - ended
        done.set()
        watcher.join()
        lags = [b for b, _s in samples] or [0]
        seconds = [s for _b, s in samples] or [0.0]
        print(
            f"during {args.duration} s of tpcb-like at {tps:.0f} TPS ({len(samples)} samples): lag median "
            f"{statistics.median(lags) / 1024:.0f} kB, worst {max(lags) / 1024:.0f} kB; replay lag median "
            f"{statistics.median(seconds) * 1000:.0f} ms, worst {max(seconds) * 1000:.0f} ms; caught up "
            f"{caught_up:.2f} s after the run"
        )
        started = time.monotonic()
        promoted = replicas.promote_replica(replica)
        print(f"promoted in {time.monotonic() - started:.1f} s (with its own stanza)")
        services.delete_cluster(promoted, confirm_name=promoted.name)


if __name__ == "__main__":
    main()
