"""What ``scale.py`` makes, measures and removes (imported after ``django.setup()``)."""

from __future__ import annotations

import os
import pwd
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

HA_PLAN = "db-s-1vcpu-2gb"  # standbys need 2 GB plans (MIN_HA_RAM_GB)
DATA_SQL = (
    "CREATE TABLE IF NOT EXISTS scale_data AS "
    "SELECT g AS id, md5(g::text) AS note FROM generate_series(1, 10000) g"
)


class DiscardingListener:
    """An rsyslog destination on loopback that reads and drops everything sent to it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.server.getsockname()[1])
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        with conn:
            while conn.recv(65536):
                pass

    def close(self) -> None:
        self.closed = True
        self.server.close()


def start_redis() -> subprocess.Popen[bytes]:
    """A private redis-server where the test settings' REDIS_URL points (the API's rate limit
    counts there, as in production); the caller terminates it."""
    import redis

    from tests.fixtures.processes import redis_answers

    port = int(os.environ["PANEL_TEST_REDIS_PORT"])
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if not redis_answers(proc, redis.Redis(port=port)):
        raise SystemExit("redis-server did not answer within 10 s")
    return proc


# --- making and removing ---------------------------------------------------------------------------


def make_clusters(
    owner: Any,
    n: int,
    ha: int,
    plan: str,
    made: list[Any],
    sink_port: int,
    after_first: Callable[[Any], None] = lambda _cluster: None,
) -> list[float]:
    """Provision the clusters one after another (appended to ``made`` as they come, so a failure
    half-way still removes them); a little data and a log sink each; ``after_first`` is called
    with the first one while it is the panel's only cluster. Returns the provisioning times, in
    order."""
    import psycopg

    from panel.clusters import services
    from panel.logsink.services.sinks import create_sink

    seconds = []
    wanted = [(f"scale-{i:03d}", plan, 1) for i in range(n)] + [
        (f"scale-ha-{i:02d}", HA_PLAN, 3) for i in range(ha)
    ]
    for name, slug, nodes in wanted:
        started = time.monotonic()
        row = services.create_cluster(owner, name=name, plan_slug=slug, num_nodes=nodes, enqueue=False)
        made.append(row)
        cluster = services.provision_cluster(row.pk)
        made[-1] = cluster
        seconds.append(time.monotonic() - started)
        if cluster.status != "online":
            raise SystemExit(f"provisioning {name} failed: {cluster.error_message}")
        with psycopg.connect(services.connection_details(cluster).uri(), autocommit=True) as conn:
            conn.execute(DATA_SQL)
        config = {"server": "127.0.0.1", "port": sink_port, "tls": False, "format": "rfc5424"}
        create_sink(cluster, name="scale", sink_type="rsyslog", config=config)
        print(f"  {name}: {seconds[-1]:.1f} s", flush=True)
        if len(made) == 1:
            after_first(cluster)
    return seconds


def remove_all(owner: Any) -> None:
    from panel.clusters import services
    from panel.clusters.models import Cluster

    removed = 0
    for cluster in Cluster.objects.filter(owner=owner):
        try:
            services.delete_cluster(cluster, confirm_name=cluster.name)
            removed += 1
        except Exception as exc:  # noqa: BLE001 - go on with the others; say which one stayed
            print(f"could not remove {cluster.name}: {exc}", flush=True)
    print(f"removed {removed} clusters", flush=True)
    # The node's etcd (made for the clusters with standbys) outlives its last cluster: stop it
    # before its data directory goes, or it holds its ports, with this run's certificates, for
    # whatever starts next on them (a test run's etcd found it there and could not start).
    from panel.clusters.standbys.engine import patroni
    from panel.clusters.standbys.services import ha

    patroni.stop_etcd(ha.etcd_data_dir())


def provision_line(seconds: list[float]) -> str:
    return (
        f"provision: first {seconds[0]:.1f} s, last (#{len(seconds)}) {seconds[-1]:.1f} s, "
        f"median {statistics.median(seconds):.1f} s"
    )


# --- the node's periodic work ----------------------------------------------------------------------


def _timed(job: Any, cycles: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(cycles):
        started = time.perf_counter()
        job()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


def _busy() -> float:
    """Core-seconds the whole machine has spent busy (neither idle nor waiting for the disk)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)


def profile_collect(top: int = 30) -> None:
    """One more collection under cProfile (every thread's work: the pool's threads are profiled
    through threading.setprofile), printed by own time."""
    import cProfile
    import pstats

    from panel.insights import services as insights

    profiles: list[cProfile.Profile] = []

    def start(*_args: Any) -> None:
        profile = cProfile.Profile()
        profiles.append(profile)
        threading.setprofile(None)
        sys.setprofile(None)
        profile.enable()

    threading.setprofile(start)
    main = cProfile.Profile()
    main.enable()
    try:
        insights.collect_all()
    finally:
        main.disable()
        threading.setprofile(None)
    for profile in profiles:
        profile.disable()
    stats = pstats.Stats(main)
    for profile in profiles:
        stats.add(profile)
    print("where one collection spent its CPU (own time, every thread):")
    stats.sort_stats("tottime").print_stats(top)
    print("the same, the panel's own functions by time spent in them and what they called:")
    stats.sort_stats("cumulative").print_stats("/panel/", top)


def _servers_cpu(uids: set[int]) -> float:
    """Core-seconds the clusters' processes have used: each live one's own, plus what the ended
    ones (the collector's backends) left in their parent's children times."""
    total = 0.0
    for proc in psutil.process_iter(["uids", "cpu_times"]):
        info = proc.info
        if info["uids"] is None or info["uids"].real not in uids or info["cpu_times"] is None:
            continue
        times = info["cpu_times"]
        total += times.user + times.system + times.children_user + times.children_system
    return total


def periodic(made: list[Any], cycles: int) -> dict[str, Any]:
    """Each periodic job ``cycles`` times (median); the collection also says how many clusters it
    read at once (at most)."""
    from panel.clusters import tasks as cluster_tasks
    from panel.insights import services as insights
    from panel.insights.services import collection
    from panel.logsink.services import forward
    from panel.quotas import services as quotas

    running, peak = 0, 0
    lock = threading.Lock()
    inner = collection._collect_in_thread

    def counted(target: Any) -> Any:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            return inner(target)
        finally:
            with lock:
                running -= 1

    stored: list[float] = []  # seconds of each cycle spent storing, in the cycle's own thread
    inner_store = collection.store

    def timed_store(cluster: Any, snap: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner_store(cluster, snap)
        finally:
            stored[-1] += time.perf_counter() - started

    down: list[str] = []
    # What limits a cycle: the machine's cores busy during it, and how much of that was this
    # process (the collector's threads: connecting, reading, storing) rather than the servers.
    cpu: list[tuple[float, float, float]] = []  # machine busy, this process, the servers: core-s
    uids = {pwd.getpwnam(cluster.os_user_name).pw_uid for cluster in made}

    def collect() -> None:
        stored.append(0.0)
        machine, own, servers = _busy(), time.process_time(), _servers_cpu(uids)
        snaps = insights.collect_all()
        cpu.append((_busy() - machine, time.process_time() - own, _servers_cpu(uids) - servers))
        down.extend(k for k, s in snaps.items() if not s.up.get("postgres"))

    collection._collect_in_thread, collection.store = counted, timed_store
    try:
        collect_s, collect_all = _timed(collect, cycles)
    finally:
        collection._collect_in_thread, collection.store = inner, inner_store
    result: dict[str, Any] = {"collect": collect_s, "collect all": collect_all, "peak": peak}
    result["stored"] = statistics.median(stored)
    result["cpu busy"] = statistics.median(row[0] for row in cpu)
    result["cpu own"] = statistics.median(row[1] for row in cpu)
    result["cpu servers"] = statistics.median(row[2] for row in cpu)
    result["workers"] = insights.collect_workers()
    result["down"] = sorted(set(down))
    for name, job in (
        ("reconcile", cluster_tasks.reconcile),
        ("quota", quotas.run_all),
        ("logsink", forward.forward_round),
    ):
        result[name], result[f"{name} all"] = _timed(job, cycles)
    return result


# --- what the clusters hold ------------------------------------------------------------------------


def _program(proc: psutil.Process) -> str:
    name = proc.name()
    if name.startswith(("postgres", "postmaster")):
        return "postgres"
    if name in ("pgbouncer", "haproxy", "etcd"):
        return name
    if any("patroni" in part for part in proc.cmdline()):
        return "patroni"
    return "other"


def memory(made: list[Any], data_dir: str) -> tuple[dict[Any, dict[str, int]], dict[str, int]]:
    """PSS in bytes of each cluster's processes (those of its own OS user), by program; and of
    the node's processes that serve them all but belong to none (the panel's etcd), recognised by
    this run's data directory on their command line."""
    by_uid: dict[int, Any] = {}
    for cluster in made:
        cluster.refresh_from_db()
        by_uid[pwd.getpwnam(cluster.os_user_name).pw_uid] = cluster
    found: dict[Any, dict[str, int]] = {c: defaultdict(int) for c in made}
    shared: dict[str, int] = defaultdict(int)
    me = os.getpid()
    for proc in psutil.process_iter(["uids"]):
        try:
            cluster = by_uid.get(proc.info["uids"].real)
            if cluster is not None:
                found[cluster][_program(proc)] += proc.memory_full_info().pss
            elif proc.pid != me and any(data_dir in part for part in proc.cmdline()):
                shared[_program(proc)] += proc.memory_full_info().pss
        except psutil.Error:
            continue
    return found, shared


def _tree_bytes(root: Path) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def disk(made: list[Any]) -> dict[Any, int]:
    return {cluster: _tree_bytes(cluster.data_root) for cluster in made}


def report(
    cycles: dict[str, Any],
    mem: dict[Any, dict[str, int]],
    shared: dict[str, int],
    used: dict[Any, int],
) -> list[str]:
    mb = 2**20
    lines = [
        f"collect: median {cycles['collect']:.2f} s of {', '.join(f'{s:.2f}' for s in cycles['collect all'])}"
        f" s, of which storing {cycles['stored']:.2f} s (one thread);"
        f" {cycles['peak']} clusters read at once at most ({cycles['workers']} threads)"
        + (f"; not answering: {', '.join(cycles['down'])}" if cycles["down"] else ""),
        f"collect CPU: the machine busy {cycles['cpu busy']:.1f} core-s of"
        f" {cycles['collect'] * (os.cpu_count() or 1):.1f} ({os.cpu_count()} cores × the median cycle),"
        f" of which this process (the collector's threads) {cycles['cpu own']:.1f} core-s,"
        f" the clusters' servers {cycles['cpu servers']:.1f} core-s, the rest the machine's other work",
    ]
    for name in ("reconcile", "quota", "logsink"):
        lines.append(
            f"{name}: median {cycles[name]:.2f} s of {', '.join(f'{s:.2f}' for s in cycles[f'{name} all'])} s"
        )
    for kind, members in (("one-member", 1), ("with standbys", 3)):
        clusters = [c for c in mem if c.num_nodes == members]
        if not clusters:
            continue
        programs = sorted({p for c in clusters for p in mem[c]})
        parts = [f"{p} {statistics.median(mem[c].get(p, 0) for c in clusters) / mb:.1f}" for p in programs]
        total = statistics.median(sum(mem[c].values()) for c in clusters) / mb
        disk_mb = statistics.median(used[c] for c in clusters) / mb
        lines.append(
            f"idle {kind} ({len(clusters)}): PSS median {total:.1f} MB ({', '.join(parts)} MB); "
            f"disk median {disk_mb:.0f} MB"
        )
    all_mb = sum(sum(m.values()) for m in mem.values()) / mb
    lines.append(f"idle all clusters: PSS {all_mb:.0f} MB in all")
    if shared:
        shared_parts = ", ".join(f"{p} {b / mb:.1f} MB" for p, b in sorted(shared.items()))
        lines.append(f"idle, the node's shared processes (PSS): {shared_parts}")
    return lines
