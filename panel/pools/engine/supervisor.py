"""The PgBouncer supervisor: the only module that spawns or signals PgBouncer processes.

One PgBouncer per cluster, daemonised (``pgbouncer -d``) so it outlives the web or worker process
that started it, running as the cluster's own OS user, with its files in one private directory of
that user.
Programs run from argument lists with a timeout; no password ever reaches argv.

PgBouncer 1.18 keeps running when it cannot bind its TCP port (it logs a WARNING and serves the
Unix socket only), so ``start`` checks that the process really listens and stops it otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import re
import resource
import shutil
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import psutil

from panel.core import runas
from panel.core.polling import wait_for
from panel.core.runas import EngineError
from panel.pools.engine.disk import BouncerFiles, log_problems, log_size

log = logging.getLogger(__name__)

BINARY_CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
# A Unix socket path longer than this does not fit sockaddr_un on every platform.
MAX_SOCKET_PATH = 100
# Descriptors PgBouncer needs beyond one per client and one per server connection: listeners,
# log file, admin console, DNS.
FD_MARGIN = 64
_CANNOT_LISTEN = re.compile(r"cannot listen on")


class SupervisorError(Exception):
    """PgBouncer could not be started or stopped; the message carries PgBouncer's own words."""


def binary() -> str:
    found = shutil.which("pgbouncer")
    if found:
        return found
    for candidate in BINARY_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    raise SupervisorError("PgBouncer is not installed: install the 'pgbouncer' package.")


def installed_release() -> str:
    """The installed PgBouncer's ``--version`` output (``PgBouncer 1.18.0`` …): after a package
    upgrade it names the new release while a PgBouncer started before still runs the old one."""
    try:
        return subprocess.run(
            [binary(), "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise SupervisorError(f"pgbouncer --version failed: {exc}") from None


def check_socket_path(files: BouncerFiles) -> None:
    length = len(str(files.socket_path).encode())
    if length >= MAX_SOCKET_PATH:
        raise SupervisorError(
            f"PgBouncer's socket path {files.socket_path} is {length} bytes long; Unix sockets allow "
            f"fewer than {MAX_SOCKET_PATH}. Choose a shorter PANEL_DATA_DIR."
        )


# --- processes ---------------------------------------------------------------------------------


def running_pid(files: BouncerFiles) -> int | None:
    """The running PgBouncer's pid from its pidfile, or None (dead, zombie, or pid reused: by
    now perhaps another cluster's PgBouncer, which runs on another ini file)."""
    try:
        pid = int(files.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "pgbouncer":
            return None
        if str(files.ini) not in proc.cmdline():
            return None
    except psutil.Error:
        return None
    return pid


def _listens_on(pid: int, port: int) -> bool:
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


def fd_limits(needed: int) -> tuple[int, int, int]:
    """``(soft, hard, granted)``: what this process has, and what PgBouncer will get."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        return soft, hard, max(soft, needed)
    return soft, hard, min(max(soft, needed), hard)


def _command(files: BouncerFiles, fds_needed: int) -> list[str]:
    args = [binary(), "-d", str(files.ini)]
    soft, _hard, granted = fd_limits(fds_needed)
    if granted > soft and shutil.which("prlimit"):
        # Debian's default soft limit is 1024; each client and server connection is one descriptor.
        args = [shutil.which("prlimit") or "prlimit", f"--nofile={granted}", "--", *args]
    return args


def _run(
    files: BouncerFiles, args: list[str], *, timeout: float, join: Sequence[Path] = ()
) -> subprocess.CompletedProcess[str]:
    # The engine's runner drops to the cluster's OS user, with a clean environment and a timeout.
    try:
        return runas.run_as(files.owner, args, timeout=timeout, cwd=files.directory, join=join)
    except EngineError as exc:
        raise SupervisorError(f"PgBouncer did not start: {exc}") from None


def _remove_stale(files: BouncerFiles) -> None:
    # After a SIGKILL the pidfile stays; if its pid were reused PgBouncer would refuse to start.
    files.pidfile.unlink(missing_ok=True)


def start(files: BouncerFiles, *, fds_needed: int, timeout: float = 10, join: Sequence[Path] = ()) -> int:
    """Start PgBouncer on ``files.ini`` and return its pid once it listens on TCP and the socket;
    ``join``: the cluster's cgroup (its plan's limits)."""
    pid = running_pid(files)
    if pid is not None:
        return pid
    check_socket_path(files)
    _remove_stale(files)
    offset = log_size(files)
    result = _run(files, _command(files, fds_needed), timeout=timeout, join=join)
    if result.returncode != 0:
        said = log_problems(files, offset) or (result.stderr or result.stdout).strip().splitlines()[-2:]
        raise SupervisorError("PgBouncer did not start: " + " ".join(said or [f"exit {result.returncode}"]))
    if not wait_for(lambda: running_pid(files) is not None and files.socket_path.exists(), timeout):
        said = log_problems(files, offset)
        raise SupervisorError("PgBouncer did not come up: " + (" ".join(said) or "no reason logged."))
    pid = running_pid(files)
    assert pid is not None
    cannot_listen = [line for line in log_problems(files, offset) if _CANNOT_LISTEN.search(line)]
    if cannot_listen or not _listens_on(pid, files.port):
        _terminate(pid, timeout=timeout)
        said = cannot_listen or [f"it does not listen on port {files.port}."]
        raise SupervisorError("PgBouncer could not listen on its port: " + " ".join(said))
    log.info("PgBouncer started (pid %s, port %s)", pid, files.port)
    return pid


def _exited(proc: psutil.Process) -> bool:
    try:
        # A daemon's zombie waits for init to reap it, which can take seconds in a container.
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _wait_exit(proc: psutil.Process, timeout: float) -> bool:
    return wait_for(lambda: _exited(proc), timeout, interval=0.01)


def _terminate(pid: int, *, timeout: float) -> None:
    try:
        proc = psutil.Process(pid)
        # SIGTERM is PgBouncer's immediate shutdown; SIGINT would wait for every server to go idle.
        proc.send_signal(signal.SIGTERM)
        if not _wait_exit(proc, timeout):
            proc.kill()
            _wait_exit(proc, timeout)
    except psutil.Error:
        return


def stop(files: BouncerFiles, *, timeout: float = 10) -> bool:
    """Stop PgBouncer if it runs (its clients are disconnected); True if it was running."""
    pid = running_pid(files)
    if pid is None:
        return False
    _terminate(pid, timeout=timeout)
    log.info("PgBouncer stopped (pid %s, port %s)", pid, files.port)
    return True


def kill(files: BouncerFiles) -> None:
    """SIGKILL, as a crash would (tests of the reconciler use it)."""
    pid = running_pid(files)
    if pid is None:
        return
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        proc.kill()
        _wait_exit(proc, 5)
