"""The panel's commands on a fresh checkout, before `make run` migrated the database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    "args",
    [["cluster", "list"], ["pool", "list", "db-x"], ["bench", "list", "db-x"], ["insights", "show", "db-x"]],
)
def test_a_panel_command_says_to_set_the_database_up_first(tmp_path: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PANEL_", "DJANGO_", "DATABASE_"))}
    env |= {"PANEL_DATA_DIR": str(tmp_path / "data"), "DJANGO_SETTINGS_MODULE": "panel.settings"}
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "no such table" not in result.stderr
    assert "The panel's database is not set up" in result.stderr
    assert "make run" in result.stderr and "manage.py migrate" in result.stderr
