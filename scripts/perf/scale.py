"""Many small clusters on one node, side by side in one run: what each costs idle, and how long the
node's periodic work and the pages take with all of them there (issue 41).

    sudo .venv/bin/python scripts/perf/scale.py --clusters N [--ha K] [--rounds 7]

Makes N one-member ``db-s-1vcpu-1gb`` clusters (and K with two standbys) on the node of a private
test panel (panel.test_settings: its own data directory, SQLite and ports; the PgBouncer-less
plan's data directories copied from a template), gives each a little data and an rsyslog sink on
loopback, lets them sit idle, then measures: provisioning of the first against the Nth, idle memory
(PSS of the processes of each cluster's own OS user, by program), disk per cluster, a metrics
collection cycle (wall time and how many clusters were read at once), a reconciler pass, a quota
cycle, a log-sink round, and the median server time of the cluster list, the Nodes page,
``GET /v2/databases``, every tab of one cluster and its Insights data (Django's test Client,
in-process). The pages are timed twice: once while the first cluster is the panel's only one (the
empty panel, after the periodic jobs ran over it as they run over all at the end), and with all of
them; the report sets the two side by side, and the p95 of all those requests with the ratio of
the two (the issue's goal: within 1.5×). Everything it made is removed, also after a failure or
Ctrl-C.

The node's capacity is declared (PANEL_NODE_RAM_GB / PANEL_NODE_VCPUS) as large as the plans
reserve, since placement reserves each member its plan's RAM and vCPU: a 24 GB machine holds 24
such reservations, whatever the clusters really use; the memory lines say what they do use.
Not part of `make test`; the machine is shared, so compare figures within one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.test_settings"

PLAN = "db-s-1vcpu-1gb"


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, required=True, help="one-member clusters")
    parser.add_argument("--ha", type=int, default=0, help="clusters with two standbys besides")
    parser.add_argument("--rounds", type=int, default=7, help="requests per page (median)")
    parser.add_argument("--cycles", type=int, default=3, help="runs of each periodic job (median)")
    parser.add_argument(
        "--profile-collect", action="store_true", help="also print where one collection spent its CPU"
    )
    args = parser.parse_args()
    if args.clusters < 1 or args.ha < 0:
        sys.exit("--clusters must be at least 1, --ha at least 0")
    if os.geteuid() != 0:
        sys.exit("run as root: clusters run as OS users of their own")
    # What placement reserves: 1 GB and 1 vCPU a one-member cluster, 2 GB and 1 vCPU a member
    # with standbys (their plans), and one to spare.
    os.environ["PANEL_NODE_RAM_GB"] = str(args.clusters + 6 * args.ha + 1)
    os.environ["PANEL_NODE_VCPUS"] = str(args.clusters + 3 * args.ha + 1)
    os.environ["PANEL_LOGSINK_TARGET_NETWORKS"] = "127.0.0.1/32"
    # The data directories on disk, as a node keeps them: the test settings put them on tmpfs when
    # it has room, where 200 clusters' (about 60 MB each) took 12 GB of the memory being measured
    # and the machine swapped itself to a halt.
    os.environ.setdefault("PANEL_TEST_TMPDIR", "/var/tmp")
    signal.signal(signal.SIGTERM, _interrupt)

    import django

    django.setup()
    import _scale_measure as measure
    import _scale_pages
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    print(f"private panel in {settings.PANEL_DATA_DIR}", flush=True)
    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("scale", "scale@example.com", "scale-password-1")
    operator = User.objects.create_superuser("scale-op", "op@example.com", "scale-password-1")
    timer = _scale_pages.PageTimer(owner, operator, args.rounds)
    sink = measure.DiscardingListener()
    redis = measure.start_redis()
    made: list[Any] = []
    interrupted = False
    empty: list[_scale_pages.Timings] = []  # the pages with the first cluster only

    def time_empty_panel(first: Any) -> None:
        # The rows the pages show (snapshots, quota and log-sink state) made as for the full panel.
        measure.periodic([first], args.cycles)
        empty.append(timer.measure(first, clusters=1))
        print(f"  empty panel: web p95 {empty[0].web_p95:.1f} ms", flush=True)

    try:
        provision = measure.make_clusters(
            owner, args.clusters, args.ha, PLAN, made, sink.port, after_first=time_empty_panel
        )
        print(measure.provision_line(provision))
        time.sleep(5)  # idle: the first checkpoint and autovacuum's first look are over
        cycles = measure.periodic(made, args.cycles)
        if args.profile_collect:
            measure.profile_collect()
        memory, shared = measure.memory(made, str(settings.PANEL_DATA_DIR))
        disk = measure.disk(made)
        full = timer.measure(made[0], clusters=len(made))
        for line in measure.report(cycles, memory, shared, disk) + _scale_pages.report(empty[0], full):
            print(line)
        single = [m for c, m in memory.items() if c.num_nodes == 1]
        idle_mb = statistics.median(sum(m.values()) for m in single) / 2**20
        print(
            f"scale: {args.clusters} clusters; collect {cycles['collect']:.2f} s; "
            f"reconcile {cycles['reconcile']:.2f} s; quota {cycles['quota']:.2f} s; "
            f"list {full.medians['list']:.0f} ms; api list {full.medians['api list']:.0f} ms; "
            f"tabs p95 {full.tabs_p95:.0f} ms; web p95 {_scale_pages.ratio(empty[0], full):.2f}× empty; "
            f"idle {idle_mb:.1f} MB/cluster"
        )
    except KeyboardInterrupt:
        print("interrupted: removing what was made", flush=True)
        interrupted = True
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sink.close()
        redis.terminate()
        redis.wait(timeout=10)
        measure.remove_all(owner)
        data_dir = Path(settings.PANEL_DATA_DIR)
        if data_dir.name.startswith("pgpanel-test-"):
            shutil.rmtree(data_dir, ignore_errors=True)
    if interrupted:
        sys.exit(130)


if __name__ == "__main__":
    main()
