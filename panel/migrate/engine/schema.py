"""The one module that runs programs for online migration: ``pg_dump --schema-only`` of a source
database piped into ``pg_restore`` on the cluster.

Argument lists, never a shell; each password goes to its own program in its environment
(``PGPASSWORD``), never in argv; both run as a user that owns nothing (``nobody`` when the
panel is root), in their own session, and are killed when the timeout passes. The dump is the
custom format, so nothing in it is read as a psql meta-command, and pg_restore connects as the
cluster's admin user: whatever the source's catalogue holds runs with the tenant's own rights.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from panel.core.runas import EngineError, OsUser, current_user, spawn_in

# The flags that make a schema-only copy the tenant's own: no owners or grants of the source's
# roles, and none of its replication objects.
DUMP_FLAGS = ["--format=custom", "--schema-only", "--no-owner", "--no-privileges"]
DUMP_FLAGS += ["--no-publications", "--no-subscriptions", "--no-security-labels", "--no-tablespaces"]
RESTORE_FLAGS = ["--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction"]
ERROR_TAIL_BYTES = 4000


def _runner() -> OsUser:
    if os.geteuid() != 0:
        return current_user()
    entry = pwd.getpwnam("nobody")
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, "/")


def _env(password: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PGPASSWORD": password,
        # Nothing of the user running the panel: no ~/.pgpass, no client certificate, no service file.
        "PGPASSFILE": "/nonexistent/pgpanel-migrate",
        "PGSERVICEFILE": "/nonexistent/pgpanel-migrate",
        "PGSSLCERT": "/nonexistent/pgpanel-migrate",
        "PGSSLKEY": "/nonexistent/pgpanel-migrate",
        "PGCONNECT_TIMEOUT": "10",
    }


def _tail(stream: object) -> str:
    if stream is None:
        return ""
    stream.seek(0)  # type: ignore[attr-defined]
    data = stream.read()[-ERROR_TAIL_BYTES:]  # type: ignore[attr-defined]
    return " ".join(data.decode("utf-8", errors="replace").split())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def copy_schema(
    bindir: Path,
    *,
    source: str,
    source_password: str,
    target: str,
    target_password: str,
    timeout: float,
) -> None:
    """``pg_dump`` of the ``source`` connection string's database, schema only, restored into the
    ``target`` one in one transaction; EngineError with the failing program's words."""
    user = _runner()
    dump_args, dump_opts = spawn_in(user, [str(bindir / "pg_dump"), *DUMP_FLAGS, "--dbname", source])
    restore_args, restore_opts = spawn_in(
        user, [str(bindir / "pg_restore"), *RESTORE_FLAGS, "--dbname", target]
    )
    with tempfile.TemporaryFile() as dump_err, tempfile.TemporaryFile() as restore_err:
        dump = subprocess.Popen(
            dump_args,
            stdout=subprocess.PIPE,
            stderr=dump_err,
            stdin=subprocess.DEVNULL,
            env=_env(source_password),
            cwd="/",
            start_new_session=True,
            **dump_opts,
        )
        try:
            restore = subprocess.Popen(
                restore_args,
                stdin=dump.stdout,
                stdout=subprocess.DEVNULL,
                stderr=restore_err,
                env=_env(target_password),
                cwd="/",
                start_new_session=True,
                **restore_opts,
            )
        except OSError as exc:
            _stop(dump)
            raise EngineError(f"Could not run pg_restore: {exc.strerror}.") from None
        assert dump.stdout is not None
        dump.stdout.close()  # pg_restore holds the pipe's read end now
        deadline = time.monotonic() + timeout
        try:
            for proc in (dump, restore):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _stop(dump)
            _stop(restore)
            raise EngineError(f"Copying the schema did not finish within {timeout:.0f} s.") from None
        if dump.returncode != 0:
            raise EngineError(f"pg_dump failed: {_tail(dump_err) or f'exit code {dump.returncode}'}")
        if restore.returncode != 0:
            raise EngineError(f"pg_restore failed: {_tail(restore_err) or f'exit code {restore.returncode}'}")
