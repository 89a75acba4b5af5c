"""A throwaway PostgreSQL server (initdb, pg_ctl) for the tests and for ``make test-pg``.

Django-free: scripts/test_pg.py starts one for the metadata database before Django is set up.
As root it runs as an unprivileged user (PostgreSQL refuses root); as anyone else, as ourselves.
Everything lives in one temporary directory, removed with the server.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TIMEOUT = 120


@dataclass(frozen=True)
class Throwaway:
    """A running throwaway server: its TCP port, its socket directory and its superuser."""

    root: Path
    port: int
    socket_dir: str
    superuser: str


def newest_bindir() -> Path:
    """PANEL_PG_BINDIR, else the bin directory of the newest server installed from Debian's packages."""
    if os.environ.get("PANEL_PG_BINDIR"):
        return Path(os.environ["PANEL_PG_BINDIR"])
    bindirs = glob.glob("/usr/lib/postgresql/*/bin")
    if not bindirs:
        raise RuntimeError("no PostgreSQL server binaries; run `make test`, which installs them")
    return Path(max(bindirs, key=lambda path: int(re.sub(r"\D", "", Path(path).parent.name) or 0)))


def free_port_outside(first: int, last: int, *, address: str = "0.0.0.0") -> int:
    """A port free on ``address`` that is not in ``first``–``last`` (the clusters' range)."""
    while True:
        with socket.socket() as sock:
            sock.bind((address, 0))
            port = int(sock.getsockname()[1])
        if not first <= port <= last:
            return port


@contextlib.contextmanager
def throwaway_server(
    *,
    port: int,
    listen_addresses: str,
    pg_hba: str,
    superuser: str,
    password: str | None = None,
    settings: str = "",
    run_as: str = "postgres",
    prefix: str = "pgpanel-pg-",
) -> Iterator[Throwaway]:
    """initdb and start a server; stop it (immediate mode) and remove its files on the way out.

    ``pg_hba`` replaces initdb's pg_hba.conf; ``settings`` is appended to postgresql.conf;
    ``password`` (for host connections) is given to initdb through a 0600 file, never argv.
    ``run_as`` is the user the server runs as when we are root.
    """
    bindir = newest_bindir()
    as_root = os.geteuid() == 0
    runner = pwd.getpwnam(run_as) if as_root else pwd.getpwuid(os.geteuid())
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    spawn: dict[str, object] = {}
    if as_root:
        os.chmod(root, 0o755)
        os.chown(root, runner.pw_uid, runner.pw_gid)
        spawn = {"user": runner.pw_uid, "group": runner.pw_gid, "extra_groups": []}
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(root)}
    run: dict = {"check": True, "capture_output": True, "timeout": TIMEOUT, "env": env, "cwd": root, **spawn}
    pgdata, sockets = root / "pgdata", root / "sockets"
    started = False
    try:
        sockets.mkdir(mode=0o700)
        os.chown(sockets, runner.pw_uid, runner.pw_gid)
        initdb = [str(bindir / "initdb"), "-D", str(pgdata), "-U", superuser, "--encoding", "UTF8"]
        initdb += ["--locale", "C.UTF-8", "--no-instructions"]
        if password is not None:
            pwfile = root / "pwfile"
            pwfile.write_text(password + "\n")
            os.chmod(pwfile, 0o600)
            os.chown(pwfile, runner.pw_uid, runner.pw_gid)
            initdb += ["--pwfile", str(pwfile)]
        try:
            subprocess.run(initdb, **run)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed: {exc.stderr.decode(errors='replace').strip()}") from exc
        finally:
            (root / "pwfile").unlink(missing_ok=True)
        with open(pgdata / "postgresql.conf", "a") as conf:
            conf.write(f"port = {port}\nlisten_addresses = '{listen_addresses}'\n")
            conf.write(f"unix_socket_directories = '{sockets}'\n{settings}")
        (pgdata / "pg_hba.conf").write_text(pg_hba)
        started = True
        try:
            subprocess.run(
                [str(bindir / "pg_ctl"), "start", "-D", str(pgdata), "-w", "-l", str(root / "log")], **run
            )
        except subprocess.CalledProcessError as exc:
            log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
            raise RuntimeError(f"PostgreSQL did not start:\n{log[-3000:]}") from exc
        yield Throwaway(root=root, port=port, socket_dir=str(sockets), superuser=superuser)
    finally:
        if started:
            subprocess.run([str(bindir / "pg_ctl"), "stop", "-D", str(pgdata), "-m", "immediate", "-w"],
                           **{**run, "check": False})  # fmt: skip
        shutil.rmtree(root, ignore_errors=True)
