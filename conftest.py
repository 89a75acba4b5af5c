"""Shared fixtures: the session's own ports and data directory, and the order modules run in.

The fixtures themselves live in ``tests/fixtures/`` by concern (registered below): the personas
(``people``), real Redis, Celery workers and node agents (``processes``), real clusters
(``clusters``), the session's two-member cluster (``ha_pair``), the pair of node agents the
two-node journeys share (``agent_pair``) and nodes with addresses of their own in network
namespaces (``netns``) and the panel's node agents in them (``nsnodes``).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.people",
    "tests.fixtures.processes",
    "tests.fixtures.clusters",
    "tests.fixtures.ha_pair",
    "tests.fixtures.agent_pair",
    "tests.fixtures.netns",
    "tests.fixtures.nsnodes",
]

ROOT = Path(__file__).resolve().parent


DEFAULT_TEST_PORT_RANGE = (26000, 26999)
# Where a session alone (no xdist: an engineer's few modules beside a full run) takes its window:
# clear of the xdist runs' windows, which fill DEFAULT_TEST_PORT_RANGE.
LONE_SESSION_PORT_RANGE = (28000, 28999)


PORT_WINDOW = 200


@pytest.fixture(scope="session", autouse=True)
def _private_port_window() -> None:
    """Give this test session its own slice of the test port range.

    Several sessions (engineers, CI jobs, xdist's workers) run on one machine at once; each starts
    from the lowest free port, so two of them would pick the same port between checking it and
    PostgreSQL binding it. A window of its own makes that race unlikely; a lone session's window
    lies outside the xdist runs' range altogether. An explicit PANEL_PORT_RANGE is kept.
    """
    from django.conf import settings

    if tuple(settings.PANEL_PORT_RANGE) != DEFAULT_TEST_PORT_RANGE:
        return
    first, last = DEFAULT_TEST_PORT_RANGE
    worker, run_id = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if worker.startswith("gw") and run_id:
        # The sessions of one xdist run take windows of their own, side by side from where the
        # run's id points: they never race each other, only (unlikely) another run.
        slots = (last - first + 1) // PORT_WINDOW
        start = first + PORT_WINDOW * ((int(run_id[:8], 16) + int(worker[2:])) % slots)
    else:
        first, last = LONE_SESSION_PORT_RANGE
        start = first + 2 * random.SystemRandom().randrange((last - first + 1 - PORT_WINDOW) // 2 + 1)
    settings.PANEL_PORT_RANGE = (start, start + PORT_WINDOW - 1)
    os.environ["PANEL_PORT_RANGE"] = f"{start}-{start + PORT_WINDOW - 1}"  # for the Celery worker


@pytest.hookimpl(trylast=True)  # header lines come out in reverse call order: this one first
def pytest_report_header(config: pytest.Config) -> str:
    """Which metadata database this run uses, at the top of the log (make test / make test-pg)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"metadata: SQLite, test database {db['TEST']['NAME']}"
    return f"metadata: PostgreSQL at {db['HOST']}:{db['PORT']}, test database test_{db['NAME']}"


@pytest.fixture(scope="session", autouse=True)
def _remove_test_data_dir() -> Iterator[None]:
    """Stop every cluster the run left behind and remove the test data directory."""
    yield
    from django.conf import settings

    data_dir = Path(settings.PANEL_DATA_DIR)
    # This node's clusters, and those of the nodes tests run agents for (tests/test_nodes.py).
    for clusters_dir in [data_dir / "clusters", *data_dir.glob("nodes/*/clusters")]:
        remove_clusters_in(clusters_dir)
    if Path(settings.PANEL_DATA_DIR).name.startswith("pgpanel-test-"):
        shutil.rmtree(settings.PANEL_DATA_DIR, ignore_errors=True)


def remove_clusters_in(clusters_dir: Path) -> None:
    """Stop the clusters under a data directory's ``clusters/`` and remove their system users."""
    from panel.clusters.engine import postgres

    if clusters_dir.exists():
        for root in clusters_dir.iterdir():
            postgres.kill(root / "pgdata")
            _remove_cluster_user(root)


def _remove_cluster_user(data_root: Path) -> None:
    """The system user of a cluster the run left behind: its processes stopped, then the user.

    The name comes from the directory (``clusters/<id hex>``, as ``Cluster.own_os_user_name``),
    never from the directory's owner: once that user is gone, its uid can belong to a cluster
    another worker is making, whose processes a sweep by uid would kill."""
    import psutil
    from django.conf import settings

    from panel.core import osusers
    from panel.core.polling import wait_ended

    if os.geteuid() != 0:
        return
    name = f"{settings.PANEL_CLUSTER_USER_PREFIX}{data_root.name[:8]}"
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    wait_ended(procs, 10)  # zombies too: userdel passes them by, their reaping is init's
    osusers.remove_system_user(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Under pytest-xdist the controller runs no test, so no session fixture removes the data
    directory its settings made (each worker removes its own): remove it here."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    data_dir = Path(os.environ.get("PANEL_TEST_DATA_DIR", ""))
    if data_dir.name.startswith("pgpanel-test-"):
        shutil.rmtree(data_dir, ignore_errors=True)


# The modules that take longest (each builds clusters with standbys, or runs two node agents),
# measured in full runs: collected first, so that `--dist loadfile` hands them out at the start
# and the run does not end with one worker on a four-minute module while the other idles.
# Within a module the order stays as written.
SLOWEST_FIRST = (
    "panel/clusters/tests/test_etcd_members.py",  # first on its worker: no other store around yet
    "tests/test_remote_members_takeover.py",
    "tests/test_remote_members_changes.py",
    "tests/test_remote_replicas.py",
    "tests/test_two_nodes.py",
    "tests/test_netns_cluster.py",
    "panel/clusters/tests/test_ha_rolling.py",
    "panel/clusters/tests/test_ha_failover.py",
    "panel/clusters/tests/test_ha_member_count.py",
)


# The modules that borrow ``two_nodes`` (tests/fixtures/agent_pair.py): one xdist work unit, so
# that one worker runs them in a row on one pair of node agents instead of each starting its own
# (about 60 s less of that worker's time; SLOWEST_FIRST keeps them side by side, at the start).
# The HA pair's borrowers (tests/fixtures/ha_pair.py) stay spread, a pair a worker: tried as one
# unit, one borrower's breakage (a standby refused by the primary's TLS) failed all that followed.
TWO_NODE_JOURNEYS = (
    "tests/test_remote_members_takeover.py",
    "tests/test_remote_members_changes.py",
    "tests/test_remote_replicas.py",
    "tests/test_two_nodes.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` with the two-node journeys as one file (else xdist's own)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class TwoNodeJourneysTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return TWO_NODE_JOURNEYS[0] if scope in TWO_NODE_JOURNEYS else scope

    return TwoNodeJourneysTogether(config, log)  # type: ignore[arg-type]


# The browser journeys keep a core busy each (Chromium, the web, the worker): left in collection
# order they met at the end of the run, three at once on two cores. They go out spread over the
# run instead, the first ones between the slowest modules, which mostly wait on Patroni, etcd and
# agents.
BROWSER = "tests/browser/"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    modules = list(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in items))
    browsers = [path for path in modules if path.startswith(BROWSER)]
    others = sorted(
        (path for path in modules if not path.startswith(BROWSER)), key=lambda path: rank.get(path, len(rank))
    )
    step = max(1, len(others) // max(1, len(browsers)))
    order: list[str] = []
    for index, path in enumerate(others):
        order.append(path)
        if index % step == 0 and browsers:
            order.append(browsers.pop(0))
    order += browsers
    position = {path: index for index, path in enumerate(order)}
    items.sort(key=lambda item: position[item.nodeid.split("::", 1)[0]])  # stable within a module
