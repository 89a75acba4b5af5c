"""A cluster's deletion kills what still runs as its system user and goes on once each process has
ended: a zombie has (it runs and holds nothing), however long its parent takes to reap it (init
in a container: a second or two; here a parent that never does)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import psutil
import pytest

from panel.clusters.engine import isolation
from panel.core import osusers
from panel.core.runas import OsUser

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="makes a system user: needs root")

NAME = "pgc-zombie01"
# A parent of root's that starts a process as the cluster's user and never reaps it.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen(["sleep", "300"], user=int(sys.argv[1]), group=int(sys.argv[2]), extra_groups=[])
print(child.pid, flush=True)
time.sleep(300)
"""


@pytest.fixture
def user() -> Iterator[OsUser]:
    made = osusers.ensure_system_user(NAME)
    yield made
    osusers.remove_system_user(NAME)


def test_a_killed_process_whose_zombie_nobody_reaps_holds_up_nothing(user: OsUser) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(user.uid), str(user.gid)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.uids().real == user.uid and child.status() != psutil.STATUS_ZOMBIE
        cluster = SimpleNamespace(os_user_name=NAME, own_os_user_name=NAME)
        started = time.monotonic()
        isolation.kill_leftover_processes(cluster)  # type: ignore[arg-type]
        assert time.monotonic() - started < 3  # psutil.wait_procs waited its 10 s for the reaping
        assert child.status() == psutil.STATUS_ZOMBIE  # killed, not reaped: its parent never does
        osusers.remove_system_user(NAME)  # userdel passes a zombie by
        osusers.ensure_system_user(NAME)  # (for the fixture's removal)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
