"""System users the panel creates when it runs as root: one per cluster, one for pgbench.

Only this module runs useradd/userdel (the cluster services and the pgbench runner call it) (argument lists, never a shell, with a timeout). Users are
system users with no home directory and no login shell; each gets a group of its own.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import time

from panel.core.runas import EngineError, OsUser

# useradd's own rule on Debian (NAME_REGEX for system users), kept short enough for `ps`.
_NAME_RE = re.compile(r"[a-z_][a-z0-9_-]{0,30}")
_LOCK_RETRIES = 20  # useradd/userdel give up at once when another one holds /etc/passwd's lock


def _entry(name: str) -> OsUser | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    for _attempt in range(_LOCK_RETRIES):
        result = subprocess.run(args, capture_output=True, text=True, timeout=30)
        if result.returncode != 10 and "lock" not in result.stderr:  # 10: cannot lock the file
            return result
        time.sleep(0.2)
    return result


def ensure_system_user(name: str) -> OsUser:
    """The system user ``name``, created (with a group of its own) if it does not exist yet."""
    if not _NAME_RE.fullmatch(name):
        raise EngineError(f"{name!r} is not a valid system user name.")
    existing = _entry(name)
    if existing is not None:
        if existing.uid == 0:
            raise EngineError(f"The system user {name!r} is root; refusing to run anything as it.")
        return existing
    if os.geteuid() != 0:
        raise EngineError(f"Only root can create the system user {name!r}.")
    result = _run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--comment",
            "pgpanel",
            name,
        ]
    )
    user = _entry(name)
    if user is None:
        raise EngineError(f"Could not create the system user {name!r}: {result.stderr.strip()}")
    return user


def remove_system_user(name: str) -> None:
    """Remove the system user ``name`` and its group; nothing to do when it does not exist."""
    if _entry(name) is None or os.geteuid() != 0:
        return
    result = _run(["userdel", name])
    if _entry(name) is not None:
        raise EngineError(f"Could not remove the system user {name!r}: {result.stderr.strip()}")
