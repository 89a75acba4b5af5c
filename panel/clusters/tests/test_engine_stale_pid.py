"""A postmaster killed with SIGKILL leaves its postmaster.pid behind. Its pid may by now belong to
another PostgreSQL process (another cluster's server, another test session's initdb backend): the
panel's "last resort" kill before deleting files must not signal it (seen: an initdb killed in its
post-bootstrap step by another cluster's deletion)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from panel.clusters.engine import postgres


def _named_postgres(tmp_path: Path, cwd: Path) -> subprocess.Popen[bytes]:
    """A real process the kernel calls "postgres" (Python run through a link of that name), which
    dies of SIGQUIT as a postmaster does (a test runner may start its children with it ignored)."""
    link = tmp_path / "bin" / "postgres"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(sys.executable)
    code = "import signal, time; signal.signal(signal.SIGQUIT, signal.SIG_DFL); print(flush=True); time.sleep(60)"
    proc = subprocess.Popen([str(link), "-c", code], cwd=cwd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.readline()  # its SIGQUIT handler is the default one now
    return proc


@pytest.fixture
def pgdata(tmp_path: Path) -> Path:
    path = tmp_path / "pgdata"
    path.mkdir()
    return path


@pytest.fixture
def stranger(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another PostgreSQL's process, running in its own data directory."""
    other = tmp_path / "other-pgdata"
    other.mkdir()
    proc = _named_postgres(tmp_path, other)
    yield proc
    proc.kill()
    proc.wait()


def _write_pid_file(pgdata: Path, pid: int, started: float) -> None:
    (pgdata / "postmaster.pid").write_text(f"{pid}\n{pgdata}\n{int(started)}\n5432\n/tmp\n*\n")


def test_a_stale_postmaster_pid_naming_another_postgres_is_not_ours(pgdata, stranger):
    assert psutil.Process(stranger.pid).name() == "postgres"
    _write_pid_file(pgdata, stranger.pid, time.time() - 3600)  # our server, killed an hour ago
    assert postgres.postmaster_pid(pgdata) is None
    postgres.kill(pgdata, timeout=1)
    assert stranger.poll() is None  # the other one still runs
    os.kill(stranger.pid, 0)


def test_a_postmaster_running_in_its_data_directory_is_found_and_killed(tmp_path, pgdata):
    proc = _named_postgres(tmp_path, pgdata)
    try:
        _write_pid_file(pgdata, proc.pid, psutil.Process(proc.pid).create_time())
        assert postgres.postmaster_pid(pgdata) == proc.pid
        postgres.kill(pgdata, timeout=5)  # SIGQUIT, waited for until it ended
        # Ended: gone, or a zombie its parent (this test) has not reaped yet; kill no longer
        # waits for the reaping (init's, seconds later in a container), which frees nothing.
        assert not psutil.pid_exists(proc.pid) or psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE
        assert proc.wait(timeout=1) is not None
    finally:
        proc.kill()
        proc.wait()
