"""The pgbench runner: own process group, lines with arrival times, private work directories."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time

import pytest

from benchmarks.engine import runner
from panel.core import runas


def test_it_reads_both_streams_line_by_line_and_reports_the_exit_code(tmp_path: object) -> None:
    pgbench = runner.pgbench_path("15")
    proc = runner.LoadProcess([pgbench, "--version"], runner.base_env())
    lines = []
    deadline = time.monotonic() + 10
    while not proc.done and time.monotonic() < deadline:
        line = proc.next_line(0.2)
        if line is not None:
            lines.append(line)
    assert proc.wait(5) == 0
    assert [line.stream for line in lines] == [runner.STDOUT]
    assert lines[0].text.startswith("pgbench (PostgreSQL)")
    assert abs(lines[0].at - time.time()) < 10


def test_it_runs_pgbench_in_its_own_session(tmp_path: object) -> None:
    socket_dir = runner.make_workdir()
    try:
        args = [runner.pgbench_path(), "-h", str(socket_dir), "-p", "1", "-n", "-t", "1", "x"]
        proc = runner.LoadProcess(args, runner.base_env())
        with contextlib.suppress(ProcessLookupError):
            assert os.getpgid(proc.pid) == proc.pid or proc.poll() is not None
        assert proc.wait(10) == 1
    finally:
        runner.remove_workdir(socket_dir)


def test_work_directories_and_files_are_private_to_the_pgbench_user() -> None:
    workdir = runner.make_workdir()
    try:
        assert stat.S_IMODE(workdir.stat().st_mode) == 0o700
        script = workdir / "custom.sql"
        runner.write_private(script, "SELECT 1;\n")
        assert stat.S_IMODE(script.stat().st_mode) == 0o600
        assert script.stat().st_uid == workdir.stat().st_uid == runner.bench_user().uid
        if os.geteuid() == 0:
            assert runner.bench_user().uid not in (0, runas.os_user().uid)
    finally:
        runner.remove_workdir(workdir)
    assert not workdir.exists()


def test_kill_group_leaves_processes_that_are_not_pgbench_alone() -> None:
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert not runner.is_pgbench(sleeper.pid)
        assert runner.kill_group(sleeper.pid) is False
        assert sleeper.poll() is None
        assert runner.process_alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not runner.process_alive(sleeper.pid)
    assert runner.kill_group(None) is False


def test_a_missing_program_is_a_runner_error_naming_it_without_its_path() -> None:
    with pytest.raises(runner.RunnerError, match="Could not run pgbench: ") as caught:
        runner.LoadProcess(["/nonexistent/pgbench"], runner.base_env())
    assert "/nonexistent" not in str(caught.value)
