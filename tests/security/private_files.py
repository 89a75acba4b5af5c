"""A panel process as an operator starts it, the modes of the files it leaves, and a look at them
as the local user ``nobody``: what the tests of the panel's private files share (issue 10, item 5
and row 6: tests/security/test_private_data_dir.py, tests/security/test_make_run_private.py)."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a program as the local user `nobody`, with none of root's groups: the attacker of row 6."""
    nobody = pwd.getpwnam("nobody")
    return subprocess.run(
        list(args),
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=10,
        cwd="/",
    )


def panel_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PANEL_", "DJANGO_", "DATABASE_", "REDIS_"))
    }
    return env | {"DJANGO_SETTINGS_MODULE": "panel.settings", "PANEL_DATA_DIR": str(data_dir)} | extra


def run_panel(data_dir: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """A panel process as an operator starts it, from a shell whose umask is the usual 022."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=panel_env(data_dir, **extra),
        capture_output=True,
        text=True,
        timeout=120,
        umask=0o022,
    )
