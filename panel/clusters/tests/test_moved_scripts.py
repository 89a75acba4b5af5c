"""Patroni configurations written before issue 40's standbys room name the scripts at their old
paths (``panel/clusters/engine/patroni_callback.py``, ``…/patroni_before_stop.py``): the
forwarding files there run the moved scripts, as Patroni runs them (``python -I``, its arguments
appended); configurations written now name the new paths."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from panel.clusters.standbys.engine import patroni, patroni_before_stop
from panel.clusters.standbys.services import ha_files, handover

OLD = Path(__file__).resolve().parent.parent / "engine"


def test_the_old_callback_path_repoints_pgbouncer(tmp_path):
    ini = tmp_path / "pgbouncer.ini"
    ini.write_text("[databases]\napp = host=/run/sock port=5432 dbname=app\n")
    argv = [str(tmp_path / "pgbouncer.pid"), "/run/sock", "6001", "on_role_change", "primary", "scope"]
    result = subprocess.run(
        [sys.executable, "-I", str(OLD / "patroni_callback.py"), str(ini), *argv], timeout=30
    )
    assert result.returncode == 0
    assert ini.read_text() == "[databases]\napp = host=/run/sock port=6001 dbname=app\n"


def test_the_old_before_stop_path_holds_the_stop_during_a_switchover(tmp_path):
    argv = [sys.executable, "-I", str(OLD / "patroni_before_stop.py"), str(tmp_path)]
    assert subprocess.run(argv, timeout=30).returncode == 0  # an ordinary stop: at once
    (tmp_path / patroni_before_stop.PENDING).write_text("switchover\n")
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 20
    while not (tmp_path / patroni_before_stop.STOPPING).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / patroni_before_stop.STOPPING).exists()
    (tmp_path / patroni_before_stop.PENDING).unlink()
    assert proc.wait(timeout=20) == 0


def test_configurations_written_now_name_the_moved_scripts():
    moved = Path(patroni.__file__).parent
    assert moved / "patroni_callback.py" == ha_files.CALLBACK
    assert moved / "patroni_before_stop.py" == handover.SCRIPT
    assert ha_files.CALLBACK.is_file() and handover.SCRIPT.is_file()
    assert moved != OLD
