"""Patroni configurations written before issue 40's standbys room name the scripts at their old
paths (``panel/clusters/engine/patroni_callback.py``, ``…/patroni_before_stop.py``): the
forwarding files there run the moved scripts, as Patroni runs them (``python -I``, its arguments
appended); configurations written now name the new paths."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def test_a_node_agent_finds_a_moved_function_by_its_old_name():
    """A call queued before the update, or sent by a node not updated yet, names the old module."""
    from panel.clusters.lib import moved
    from panel.clusters.standbys.lib.patroni import MemberInfo
    from panel.core import agent

    assert agent.lookup("panel.clusters.services.members.list_members") is agent.lookup(
        "panel.clusters.standbys.services.members.list_members"
    )
    assert agent.lookup("panel.clusters.services.members.switchover") is agent.lookup(
        "panel.clusters.standbys.services.switchover.switchover"
    )
    assert agent.lookup("panel.clusters.services.replication.replica_lag") is agent.lookup(
        "panel.clusters.replicas.services.streaming.replica_lag"
    )
    assert agent.lookup("panel.managed.services.replication.set_replication") is agent.lookup(
        "panel.managed.services.logical_replication.set_replication"
    )
    assert agent._own("panel.clusters.lib.patroni:MemberInfo") is MemberInfo
    for old, new in moved.MODULES.items():
        try:
            importlib.import_module(new)  # a module
        except ImportError:
            agent.lookup(new)  # or the one function that moved on its own
        assert agent.current_name(old) == new
        with pytest.raises(ImportError):
            importlib.import_module(old)
    assert agent.current_name("panel.clusters.services.lifecycle.x") == "panel.clusters.services.lifecycle.x"
