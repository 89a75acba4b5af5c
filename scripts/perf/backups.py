"""Backups' figures for the closing note, on one throw-away cluster in one run:

- RPO: seconds from a commit on an otherwise idle cluster to the moment its WAL segment is in the
  repository (what is lost if the node dies before), with archive_timeout as the panel sets it;
- the time of a full backup and of a restore (fork) of a pgbench database at ``--scale``;
- the cost of archiving: TPS of a ``--duration`` s tpcb-like run with archiving on and off
  (archive_mode off through ALTER SYSTEM and a restart), interleaved ``--rounds`` times.

    .venv/bin/python scripts/perf/backups.py [--scale 50] [--duration 30] [--rounds 2] [--rpo-samples 2]

Not part of `make test`: it takes several minutes. Compare within a run (the machine is shared).
"""

from __future__ import annotations

import statistics
import time

from _bench_setup import bench_cluster
from _bench_setup import by_hand as hand_run
from _cli import counts_parser


def rpo_sample(cluster) -> float:
    """Commit one row, then wait until pg_stat_archiver has the segment holding it."""
    import psycopg

    from panel.clusters import services as cluster_services
    from panel.clusters.engine import dbconn

    uri = cluster_services.connection_details(cluster).uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS rpo (t timestamptz)")
        conn.execute("INSERT INTO rpo VALUES (now())")
        lsn = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
    committed = time.monotonic()
    with dbconn.admin_connection(cluster) as conn:
        segment = conn.execute("SELECT pg_walfile_name(%s::pg_lsn)", [str(lsn)]).fetchone()[0]
    while True:
        with dbconn.admin_connection(cluster) as conn:
            last = conn.execute("SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver").fetchone()[0]
        if last[:24] >= segment:
            return time.monotonic() - committed
        time.sleep(0.2)


def set_archiving(cluster, on: bool) -> None:
    from panel.clusters import services as cluster_services
    from panel.clusters.engine import dbconn

    with dbconn.admin_connection(cluster) as conn:
        conn.execute("ALTER SYSTEM RESET archive_mode" if on else "ALTER SYSTEM SET archive_mode = off")
    cluster_services.perform_action(cluster, "restart")


def main() -> None:
    args = counts_parser(__doc__, scale=50, duration=30, rounds=2, clients=8, rpo_samples=2).parse_args()
    with bench_cluster("perf-backups", scale=args.scale) as bench:
        from benchmarks.lib.pgbench_command import RunOptions
        from panel.backups.lib.pgbackrest import ARCHIVE_TIMEOUT
        from panel.backups.services import backups, restore
        from panel.clusters import services as cluster_services

        cluster = bench.cluster
        started = time.perf_counter()
        job = backups.create_backup(cluster, "full")
        backup_s = time.perf_counter() - started
        size = backups.page(cluster).backups[0]
        print(
            f"full backup of scale {args.scale}: {backup_s:.1f} s ({size.size / 1024**2:.0f} MiB of data, "
            f"{size.repo_size / 1024**2:.0f} MiB in the repository, label {job.label})"
        )
        started = time.perf_counter()
        fork = restore.restore_cluster(cluster, bench.owner, name="perf-fork", target_time=None)
        restore_s = time.perf_counter() - started
        print(
            f"restore into a new cluster (fork, latest point, online with its own stanza): {restore_s:.1f} s"
        )
        cluster_services.delete_cluster(fork, confirm_name=fork.name)

        samples = [rpo_sample(cluster) for _ in range(args.rpo_samples)]
        print(
            f"RPO with archive_timeout = {ARCHIVE_TIMEOUT} s on an idle cluster: "
            f"{', '.join(f'{s:.1f}' for s in samples)} s (worst {max(samples):.1f} s)"
        )

        options = RunOptions(clients=args.clients, threads=2, duration_s=args.duration)
        tps: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.rounds):
            for on in (True, False):
                set_archiving(cluster, on)
                cluster.refresh_from_db()
                tps[on].append(hand_run(bench, options))
        set_archiving(cluster, True)
        with_on, with_off = statistics.median(tps[True]), statistics.median(tps[False])
        print(
            f"tpcb-like, {args.clients} clients, {args.duration} s, interleaved x{args.rounds}: "
            f"archiving on {', '.join(f'{t:.0f}' for t in tps[True])} TPS, "
            f"off {', '.join(f'{t:.0f}' for t in tps[False])} TPS; ratio on/off {with_on / with_off:.2f}"
        )


if __name__ == "__main__":
    main()
