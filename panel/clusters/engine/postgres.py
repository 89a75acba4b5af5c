"""The PostgreSQL supervisor: the only module that spawns or signals PostgreSQL processes.

Every program runs through ``panel.core.runas``: from an argument list (never a shell), with a
timeout, as the cluster's own OS user when the panel runs as root (``OsUser``, passed explicitly),
else as ourselves. Passwords go through a 0600 file, never argv.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psutil
from django.conf import settings

from panel.clusters.engine import startlog
from panel.core.polling import wait_ended
from panel.core.runas import EngineError, OsUser, chown_to, make_private_dir, run_as, write_private_file

log = logging.getLogger(__name__)

SEARCH_GLOB = "/usr/lib/postgresql/*/bin"
REQUIRED_PROGRAMS = ("initdb", "pg_ctl", "postgres")


MISSING_BINARIES = (
    "No PostgreSQL server binaries were found (looked for initdb, pg_ctl and postgres in "
    f"{SEARCH_GLOB} and pg_config --bindir). Install the 'postgresql' package or set PANEL_PG_BINDIR."
)


def _stamp(program: Path) -> tuple[str, int, int] | None:
    """What identifies one build of a program: its path, inode and mtime (None if absent)."""
    try:
        st = program.stat()
    except OSError:
        return None
    return str(program), st.st_ino, st.st_mtime_ns


# The create form, create_cluster() and every pg_ctl call ask which versions are installed; a
# binary's version only changes with the binary, so each build is asked once (a failure raises,
# so it is not remembered). pg_config likewise, but Debian's is a wrapper whose answer changes as
# server versions come and go: its answer is remembered for the set of programs it chooses from
# (asked every time, it was four programs run per pg_ctl call, a few hundred a minute in the suite).
@functools.lru_cache(maxsize=64)
def _version_output(stamp: tuple[str, int, int]) -> str:
    return subprocess.run(
        [stamp[0], "--version"], capture_output=True, text=True, timeout=10, check=True
    ).stdout


# What Debian's pg_config wrapper chooses from: the newest server's, else libpq-dev's.
DEBIAN_PG_CONFIGS = "/usr/lib/postgresql/*/bin/pg_config"
DEBIAN_LIBPQ_CONFIG = "/usr/bin/pg_config.libpq-dev"


@functools.lru_cache(maxsize=16)
def _pg_config_bindir(stamp: tuple[str, int, int], choices: tuple[object, ...]) -> str:
    """``pg_config --bindir`` of this build of pg_config, with ``choices`` (the stamps of what a
    wrapper picks from) as they are: only part of the key."""
    return subprocess.run(
        [stamp[0], "--bindir"], capture_output=True, text=True, timeout=10, check=True
    ).stdout.strip()


def _version_of(bindir: Path) -> str | None:
    stamp = _stamp(bindir / "postgres")
    if stamp is None:
        return None
    try:
        out = _version_output(stamp)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"\)\s+(\d+)(?:\.\d+)?", out) or re.search(r"(\d+)\.\d+", out)
    return match.group(1) if match else None


def installed_versions() -> dict[str, Path]:
    """Major version → bin directory of every PostgreSQL server installed on the machine."""
    candidates: list[Path] = []
    if settings.PANEL_PG_BINDIR:
        candidates.append(Path(settings.PANEL_PG_BINDIR))
    else:
        candidates.extend(sorted(Path("/").glob(SEARCH_GLOB.lstrip("/"))))
        pg_config = shutil.which("pg_config")
        stamp = _stamp(Path(pg_config)) if pg_config else None
        if stamp is not None:
            choices = sorted(Path("/").glob(DEBIAN_PG_CONFIGS.lstrip("/"))) + [Path(DEBIAN_LIBPQ_CONFIG)]
            with contextlib.suppress(OSError, subprocess.SubprocessError):  # a failure is not kept
                candidates.append(Path(_pg_config_bindir(stamp, tuple(_stamp(p) for p in choices))))
    found: dict[str, Path] = {}
    for bindir in candidates:
        if all((bindir / prog).is_file() for prog in REQUIRED_PROGRAMS):
            version = _version_of(bindir)
            if version and version not in found:
                found[version] = bindir
    return dict(sorted(found.items(), key=lambda item: int(item[0]), reverse=True))


def release(version: str) -> str:
    """The ``--version`` line of the installed server of major ``version``
    (``postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)``): after a package upgrade it names
    the new minor while clusters started before still run the old one."""
    stamp = _stamp(bindir_for(version) / "postgres")
    if stamp is None:
        raise EngineError(f"PostgreSQL {version}'s server program is missing.")
    try:
        return _version_output(stamp).strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineError(f"postgres --version failed: {exc}") from None


def bindir_for(version: str) -> Path:
    versions = installed_versions()
    if version not in versions:
        if not versions:
            raise EngineError(MISSING_BINARIES)
        raise EngineError(f"PostgreSQL {version} is not installed here; installed: {', '.join(versions)}.")
    return versions[version]


def _failure(program: str, result: subprocess.CompletedProcess[str], extra: str = "") -> EngineError:
    words = (result.stderr or result.stdout or "").strip().splitlines()
    tail = " ".join(words[-3:]) if words else f"exit code {result.returncode}"
    if extra:
        tail = f"{tail} {extra}".strip()
    return EngineError(f"{program} failed: {tail}")


def make_clusters_dir() -> Path:
    """``PANEL_DATA_DIR/clusters``: 0711, so each cluster's user can reach its own data root
    (whose name it is told) but nobody but root can list the others."""
    path = Path(settings.PANEL_DATA_DIR) / "clusters"
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o711)
    return path


def make_data_root(data_root: Path, owner: OsUser) -> None:
    make_clusters_dir()
    make_private_dir(data_root, owner)


def chown_tree(root: Path, owner: OsUser) -> None:
    """Give everything under ``root`` to ``owner`` and take every right of group and others
    away (directories 0700, files 0600 at most): a cluster moving to a user of its own."""
    if not root.exists():
        return
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            chown_to(Path(path), owner)
            if not stat.S_ISLNK(st.st_mode):
                os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    chown_to(root, owner)
    os.chmod(root, 0o700)


def initdb(
    version: str, pgdata: Path, superuser: str, password: str, *, user: OsUser, timeout: float
) -> None:
    bindir = bindir_for(version)
    make_data_root(pgdata.parent, user)
    pwfile = pgdata.parent / ".initdb-pw"
    write_private_file(pwfile, password + "\n", owner=user)
    try:
        result = run_as(
            user,
            [
                str(bindir / "initdb"),
                "--pgdata",
                str(pgdata),
                "--username",
                superuser,
                "--pwfile",
                str(pwfile),
                "--auth",
                "scram-sha-256",
                "--encoding",
                "UTF8",
                "--locale",
                "C.UTF-8",
                "--data-checksums",
                "--no-instructions",
            ],
            timeout=timeout,
            cwd=pgdata.parent,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    if result.returncode != 0:
        raise _failure("initdb", result)


def basebackup(
    version: str,
    pgdata: Path,
    conninfo: str,
    slot: str,
    *,
    passfile: Path,
    user: OsUser,
    timeout: float,
) -> None:
    """A read-only replica's data directory: ``pg_basebackup`` from its source (``conninfo``,
    whose password is in ``passfile``), streaming the WAL it needs through the source's
    replication ``slot`` (made by the caller, holding WAL since before the copy starts), as the
    replica's user into its empty ``pgdata``."""
    argv = [str(bindir_for(version) / "pg_basebackup"), "--pgdata", str(pgdata), "--dbname", conninfo]
    argv += ["--wal-method=stream", "--checkpoint=fast", "--slot", slot, "--no-password"]
    result = run_as(user, argv, timeout=timeout, cwd=pgdata.parent, env={"PGPASSFILE": str(passfile)})
    if result.returncode != 0:
        raise _failure("pg_basebackup", result)


def rewind(
    version: str, pgdata: Path, source_server: str, *, password: str, user: OsUser, timeout: float
) -> None:
    """``pg_rewind``: a stopped replica's ``pgdata`` back to where ``source_server`` (libpq
    conninfo, no password: it comes through the environment) forked, then the source's files
    since. The replica must have data checksums or ``wal_log_hints``."""
    argv = [str(bindir_for(version) / "pg_rewind"), "--target-pgdata", str(pgdata)]
    argv += ["--source-server", source_server]
    result = run_as(user, argv, timeout=timeout, cwd=pgdata.parent, env={"PGPASSWORD": password})
    if result.returncode != 0:
        raise _failure("pg_rewind", result)


def promote(version: str, pgdata: Path, *, user: OsUser, timeout: float) -> None:
    """``pg_ctl promote``: a replica ends its recovery and accepts writes (waits until it does)."""
    result = _pg_ctl(version, pgdata, "promote", user=user, timeout=timeout)
    if result.returncode != 0:
        raise _failure("pg_ctl promote", result)


def postmaster_pid(pgdata: Path) -> int | None:
    """The running postmaster's pid from postmaster.pid, or None if it is not running.

    A postmaster killed with SIGKILL leaves its postmaster.pid behind, and its pid may by now be
    another PostgreSQL's (another cluster's server, or initdb's standalone backend): a process
    counts only if it runs in this data directory (a postmaster's working directory is its data
    directory), or, where that cannot be read, if it started when the file says."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0].strip())
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 0:
        return None  # a negative pid marks a standalone backend (initdb's bootstrap), not a server
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or "postgres" not in proc.name():
            return None
        if not _runs_in(proc, pgdata, lines):
            return None
    except psutil.Error:
        return None
    return pid


def _runs_in(proc: psutil.Process, pgdata: Path, lines: list[str]) -> bool:
    try:
        return Path(proc.cwd()).resolve() == pgdata.resolve()
    except psutil.AccessDenied:
        pass
    try:
        started = int(lines[2].strip())  # postmaster.pid's third line: the start, in epoch seconds
    except (ValueError, IndexError):
        return False
    return abs(proc.create_time() - started) < 2


def started_at(pgdata: Path) -> float | None:
    pid = postmaster_pid(pgdata)
    if pid is None:
        return None
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def _pg_ctl(
    version: str,
    pgdata: Path,
    command: str,
    *options: str,
    user: OsUser,
    timeout: float,
    join: Sequence[Path] = (),
) -> subprocess.CompletedProcess[str]:
    """``pg_ctl <command>`` on ``pgdata`` as the cluster's user, waiting up to ``timeout``."""
    argv = [str(bindir_for(version) / "pg_ctl"), command, "--pgdata", str(pgdata), *options]
    argv += ["--wait", "--timeout", str(int(timeout)), "--silent"]
    return run_as(user, argv, timeout=timeout + 10, cwd=pgdata.parent, join=join)


def start(
    version: str, pgdata: Path, log_file: Path, *, user: OsUser, timeout: float, join: Sequence[Path] = ()
) -> None:
    """Start the server; ``join``: the cgroups it runs in (its plan's limits, isolation.server_cgroup)."""
    if postmaster_pid(pgdata) is not None:
        return
    make_private_dir(log_file.parent, user)
    startup_log = log_file.parent / "startup.log"
    # What this start writes, not what came before it (an archiver's errors from the last run):
    # a server that fails before its logging collector runs writes only to pg_ctl's log.
    since = startlog.sizes(log_file, startup_log)
    result = _pg_ctl(
        version, pgdata, "start", "--log", str(startup_log), user=user, timeout=timeout, join=join
    )
    if result.returncode != 0:
        reason = startlog.start_reason(log_file, startup_log, since)
        raise _failure("PostgreSQL start", result, reason)


def stop(version: str, pgdata: Path, *, user: OsUser, timeout: float, mode: str = "fast") -> None:
    if postmaster_pid(pgdata) is None:
        return
    result = _pg_ctl(version, pgdata, "stop", "--mode", mode, user=user, timeout=timeout)
    if result.returncode != 0 and postmaster_pid(pgdata) is not None:
        raise _failure("PostgreSQL stop", result)


def kill(pgdata: Path, *, timeout: float = 10) -> None:
    """Last resort before deleting files: SIGQUIT the postmaster and wait for its exit."""
    pid = postmaster_pid(pgdata)
    if pid is None:
        return
    try:
        proc = psutil.Process(pid)
        children = proc.children(recursive=True)
        os.kill(pid, signal.SIGQUIT)
        wait_ended([proc, *children], timeout)
    except (psutil.Error, ProcessLookupError):
        return


def remove_data(data_root: Path, *, attempts: int = 5) -> None:
    # A process of the cluster that is still exiting (the logging collector of a server stopped in
    # immediate mode) can add a file while the tree is removed, or remove one (postmaster.pid)
    # between its listing and its unlink: try again a few times.
    for attempt in range(attempts):
        if not data_root.exists():
            return
        try:
            shutil.rmtree(data_root)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.ENOENT) or attempt == attempts - 1:
                raise
            time.sleep(0.2)


def directory_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total
