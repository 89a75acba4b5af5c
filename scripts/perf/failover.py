"""Failover and switchover on a real three-member cluster (Patroni, etcd, HAProxy, PgBouncer).

    .venv/bin/python scripts/perf/failover.py [--trials 5] [--plan db-s-1vcpu-2gb]
        [--scenarios crash,node loss,switchover] [--breakdown]
    sudo .venv/bin/python scripts/perf/failover.py --scenarios machine-loss [--trials 5]

Provisions one ``db-s-1vcpu-2gb`` cluster with three members and a transaction pool on the test
settings (a private data directory and ports), then runs ``--trials`` trials of each scenario
while a writer inserts sequential ids through the pool, one per transaction:

- crash: SIGKILL of the primary's postmaster (Patroni stays);
- node loss: SIGKILL of the primary's Patroni and postmaster together;
- switchover: ``switchover.switch`` to the synchronous standby; a second client writes straight to
  the cluster's port (HAProxy) meanwhile and reconnects when cut.

For each trial: the time from the kill (or the switchover call) to the first commit acknowledged
after the writer's first error (the interruption), the acknowledged commits missing afterwards
(lost; must be 0), and the commits whose outcome is unknown (an error during the INSERT), with
how many of those are present. Between trials the old primary is brought back (reconciler) and
the cluster waits until every standby streams again. Prints the median and worst per scenario,
and the load average at the start and the end (the figures mean little without it). For a
switchover the figure is the longest pause the pool's writer saw: the time before the pause
(the cascade, the CHECKPOINT, Patroni taking the request) costs clients nothing.

``--scenarios machine-loss`` (root, after ``make test``) builds the network-namespace harness with
the panel's node agents in three namespaces instead, loses the cluster's own machine under three
writers (multi-host URI, a pool's multi-host URI, the floating address) and removes it all after
(scripts/perf/_machine_loss.py); it runs alone.

``--breakdown`` prints, for each switchover, when each phase happened, in seconds from the
PAUSE: the panel's own steps (``switchover.switch``: cascade, CHECKPOINT, Patroni's
``POST /switchover``, the before_stop script's word, PAUSE, candidate writable, PgBouncer
repointed, RESUME), what a watcher saw every 20 ms (old primary's port closed, leader key in etcd
released and naming the candidate) and the writers' first commits after their longest pause.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.test_settings"

RECOVERY_TIMEOUT = 120.0


@dataclass
class Writer:
    params: dict
    first: int = 0  # ids from first + 1: a second writer's never meet the first's
    acked: list[tuple[int, float]] = field(default_factory=list)
    unknown: list[tuple[int, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import psycopg

        conn = None
        n = self.first
        while not self.stop.is_set():
            n += 1
            try:
                if conn is None:
                    conn = psycopg.connect(**self.params)
                conn.execute("INSERT INTO acked VALUES (%s)", [n])
                self.acked.append((n, time.monotonic()))
            except psycopg.Error:
                self.unknown.append((n, time.monotonic()))
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.02)
        if conn is not None:
            conn.close()


@dataclass
class Trial:
    scenario: str
    interruption: float
    longest_gap: float
    acked: int
    lost: int
    unknown: int
    unknown_present: int
    phases: dict[str, float] = field(default_factory=dict)
    # A second writer connected straight to the cluster's port (HAProxy), switchovers only.
    direct_gap: float | None = None
    direct_failed: int = 0


def longest_gap(acked: list[tuple[int, float]], started: float) -> tuple[float, float]:
    """The longest pause between two commits after ``started``, and when the commit ending it came."""
    times = [started] + [t for _n, t in acked if t > started]
    gaps = [(b - a, b) for a, b in zip(times, times[1:], strict=False)]
    return max(gaps) if gaps else (float("inf"), float("inf"))


class Watcher(threading.Thread):
    """Marks when the old primary's port stops taking connections and when etcd's leader key
    names another member (polled every 20 ms, only for ``--breakdown``)."""

    def __init__(self, cluster, old, phases: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
        super().__init__(daemon=True)
        from panel.clusters.standbys.services import etcd, ha

        self.old_port, self.old_name, self.phases = old.port, old.name, phases
        # The panel's etcd (TLS, the node's client certificate), as Patroni reads it.
        self.urls, self.tls = etcd.client_urls(), etcd.client_tls()
        self.key = f"/pgpanel/{ha.scope(cluster)}/leader"
        self.stop = threading.Event()

    def _leader(self) -> str | None:
        from panel.clusters.standbys.engine import etcd as etcd_engine

        try:
            value = etcd_engine.get(self.urls[:1], self.key, self.tls)
        except Exception:  # an etcd busy or out of reach for a moment: no reading this round
            return None
        return "" if value is None else value

    def run(self) -> None:
        while not self.stop.is_set():
            if "old primary stopped" not in self.phases:
                try:
                    socket.create_connection(("127.0.0.1", self.old_port), timeout=0.2).close()
                except OSError:
                    self.phases["old primary stopped"] = time.monotonic()
            leader = self._leader()
            if leader == "" and "leader key released" not in self.phases:
                self.phases["leader key released"] = time.monotonic()
            if leader and leader != self.old_name and "new leader key" not in self.phases:
                self.phases["new leader key"] = time.monotonic()
            time.sleep(0.02)


def trial(cluster, scenario: str, params: dict, breakdown: bool = False) -> Trial:  # type: ignore[no-untyped-def]
    import psycopg

    from panel.clusters.models import MemberRole
    from panel.clusters.services import reconciler
    from panel.clusters.standbys.engine import patroni
    from panel.clusters.standbys.services import ha, switchover

    deadline = time.monotonic() + RECOVERY_TIMEOUT
    while not ha.wait_healthy(cluster, 2) and time.monotonic() < deadline:
        reconciler.reconcile()
    ha.refresh_members(cluster)
    old = cluster.members.get(role=MemberRole.PRIMARY)
    with psycopg.connect(**params) as conn:
        conn.execute("TRUNCATE acked")
    writer = Writer(params)
    thread = threading.Thread(target=writer.run, daemon=True)
    thread.start()
    direct = Writer({**params, "port": cluster.port, "dbname": "defaultdb"}, first=10**9)
    direct_thread = threading.Thread(target=direct.run, daemon=True)
    if scenario == "switchover":
        direct_thread.start()
    time.sleep(3)
    phases: dict[str, float] = {}
    watcher = Watcher(cluster, old, phases) if breakdown else None
    if watcher is not None:
        watcher.start()
    started = time.monotonic()
    if scenario == "crash":
        patroni.kill_postmaster(old.pid)
    elif scenario == "node loss":
        patroni.kill_member(ha.member_config_path(cluster, old), old.pid)
    else:
        switchover.switch(cluster, None, phases)
    # Done once another member is the primary and commits have flowed for 3 s since.
    end = started + RECOVERY_TIMEOUT
    taken_over = None
    while time.monotonic() < end:
        if taken_over is None:
            statuses = ha.read_statuses(cluster)
            if any(s.is_primary and s.state == "running" and s.name != old.name for s in statuses):
                taken_over = time.monotonic()
        elif writer.acked and writer.acked[-1][1] > taken_over + 3:
            break
        time.sleep(0.1)
    writer.stop.set()
    direct.stop.set()
    thread.join(timeout=10)
    if direct_thread.is_alive():
        direct_thread.join(timeout=10)
    if watcher is not None:
        watcher.stop.set()
        watcher.join(timeout=5)
    # The outage clients saw: the longest pause between two commits after the kill (backends of a
    # killed postmaster may still commit for a moment); "first write" is the commit ending it.
    longest, resumed = longest_gap(writer.acked, started)
    interruption = resumed - started if taken_over is not None else float("inf")
    present: set[int] = set()
    for _attempt in range(50):
        try:
            with psycopg.connect(**params) as conn:
                present = {row[0] for row in conn.execute("SELECT id FROM acked")}
            break
        except psycopg.Error:
            time.sleep(0.5)
    lost = sum(1 for n, _t in writer.acked + direct.acked if n not in present)
    phases["first commit acked"] = resumed
    if direct.acked:
        phases["first direct commit after the cut"] = longest_gap(direct.acked, started)[1]
    return Trial(
        scenario,
        interruption,
        longest,
        len(writer.acked),
        lost,
        len(writer.unknown),
        sum(1 for n, _t in writer.unknown if n in present),
        phases,
        longest_gap(direct.acked, started)[0] if direct.acked else None,
        len(direct.unknown),
    )


def print_breakdown(phases: dict[str, float]) -> None:
    """Each phase in seconds from the PAUSE (negative: before it), in the order they happened."""
    zero = phases.get("paused", min(phases.values()))
    steps = sorted(phases.items(), key=lambda item: item[1])
    print("    " + " · ".join(f"{name} {at - zero:+.2f}" for name, at in steps), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--plan", default="db-s-1vcpu-2gb")
    parser.add_argument("--scenarios", default="crash,node loss,switchover")
    parser.add_argument("--breakdown", action="store_true", help="print each switchover's phases")
    args = parser.parse_args()
    print(
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True
    )

    import django

    django.setup()
    if args.scenarios == "machine-loss":
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _machine_loss import run
        from django.conf import settings

        try:
            run(args.trials)
        finally:  # the agents' data directories were under it; the harness removed the rest
            if Path(settings.PANEL_DATA_DIR).name.startswith("pgpanel-test-"):
                shutil.rmtree(settings.PANEL_DATA_DIR, ignore_errors=True)
        return
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from panel.clusters import services
    from panel.pools import services as pool_services

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    cluster = services.create_cluster(
        owner, name="db-failover", plan_slug=args.plan, num_nodes=3, enqueue=False
    )
    started = time.monotonic()
    cluster = services.provision_cluster(cluster.pk)
    try:
        if cluster.status != "online":
            sys.exit(f"provisioning failed: {cluster.error_message}")
        print(f"three members online in {time.monotonic() - started:.0f} s")
        pool_services.create_pool(cluster, "writes", "defaultdb", None, "transaction", 5)
        details = services.connection_details(cluster)
        params = {
            "host": "127.0.0.1",
            "port": cluster.pooler_port,
            "user": details.user,
            "password": details.password,
            "dbname": "writes",
            "sslmode": "require",
            "connect_timeout": 3,
            "autocommit": True,
            "prepare_threshold": None,
        }
        import psycopg

        with psycopg.connect(**params) as conn:
            conn.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
        results: list[Trial] = []
        for scenario in args.scenarios.split(","):
            for number in range(1, args.trials + 1):
                result = trial(cluster, scenario, params, args.breakdown)
                results.append(result)
                print(
                    f"{scenario:<10} #{number}: first write after {result.interruption:5.2f} s "
                    f"(longest pause {result.longest_gap:5.2f} s); "
                    f"acked {result.acked}, lost {result.lost}, unknown {result.unknown} "
                    f"({result.unknown_present} of them present)",
                    flush=True,
                )
                if result.direct_gap is not None:
                    print(
                        f"{'':<10}     direct client (HAProxy): longest pause {result.direct_gap:5.2f} s, "
                        f"{result.direct_failed} statements failed (it reconnects)",
                        flush=True,
                    )
                if args.breakdown and scenario == "switchover":
                    print_breakdown(result.phases)
        print()
        for scenario in args.scenarios.split(","):
            rows = [r for r in results if r.scenario == scenario]
            times = [r.interruption for r in rows]
            pauses = [r.longest_gap for r in rows]
            print(
                f"{scenario:<10}: {len(rows)} trials, kill → first write median {statistics.median(times):.2f} s, "
                f"worst {max(times):.2f} s (longest pause median {statistics.median(pauses):.2f} s, worst "
                f"{max(pauses):.2f} s); acknowledged commits lost {sum(r.lost for r in rows)} of "
                f"{sum(r.acked for r in rows)}; unknown outcome {sum(r.unknown for r in rows)} "
                f"({sum(r.unknown_present for r in rows)} committed)"
            )
            direct = [r.direct_gap for r in rows if r.direct_gap is not None]
            if direct:
                print(
                    f"{'':<10}  direct client through HAProxy: longest pause median "
                    f"{statistics.median(direct):.2f} s, worst {max(direct):.2f} s; "
                    f"{sum(r.direct_failed for r in rows)} statements failed"
                )
        print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    finally:
        cluster.refresh_from_db()
        services.delete_cluster(cluster, confirm_name=cluster.name)
        data_dir = Path(settings.PANEL_DATA_DIR)
        if data_dir.name.startswith("pgpanel-test-"):
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
