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
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from panel.core import runas
from panel.core.runas import EngineError, OsUser
from panel.pools.lib.admin_console import parse_log_errors

log = logging.getLogger(__name__)

BINARY_CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")
# A Unix socket path longer than this does not fit sockaddr_un on every platform.
MAX_SOCKET_PATH = 100
# Descriptors PgBouncer needs beyond one per client and one per server connection: listeners,
# log file, admin console, DNS.
FD_MARGIN = 64
# Settings PgBouncer reads only at start: a change to one of them needs a restart, not a RELOAD.
RESTART_KEYS = frozenset({"listen_addr", "listen_port", "unix_socket_dir", "unix_socket_mode", "pidfile"})
_CANNOT_LISTEN = re.compile(r"cannot listen on")


class SupervisorError(Exception):
    """PgBouncer could not be started or stopped; the message carries PgBouncer's own words."""


@dataclass(frozen=True)
class BouncerFiles:
    """Where one cluster's PgBouncer keeps its files, and where it listens."""

    directory: Path
    socket_dir: Path
    port: int
    # The cluster's OS user (Cluster.os_user_name); blank: the global runner (postgres.os_user).
    os_user_name: str = ""

    @property
    def owner(self) -> OsUser:
        """Who runs this PgBouncer and owns its files (EngineError if that user is gone)."""
        return runas.os_user_named(self.os_user_name)

    @property
    def ini(self) -> Path:
        return self.directory / "pgbouncer.ini"

    @property
    def auth(self) -> Path:
        return self.directory / "userlist.txt"

    @property
    def pidfile(self) -> Path:
        return self.directory / "pgbouncer.pid"

    @property
    def logfile(self) -> Path:
        return self.directory / "pgbouncer.log"

    @property
    def tls_cert(self) -> Path:
        return self.directory / "server.crt"

    @property
    def tls_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / f".s.PGSQL.{self.port}"

    @staticmethod
    def previous(path: Path) -> Path:
        return path.with_name(path.name + ".prev")


def binary() -> str:
    found = shutil.which("pgbouncer")
    if found:
        return found
    for candidate in BINARY_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    raise SupervisorError("PgBouncer is not installed: install the 'pgbouncer' package.")


def check_socket_path(files: BouncerFiles) -> None:
    length = len(str(files.socket_path).encode())
    if length >= MAX_SOCKET_PATH:
        raise SupervisorError(
            f"PgBouncer's socket path {files.socket_path} is {length} bytes long; Unix sockets allow "
            f"fewer than {MAX_SOCKET_PATH}. Choose a shorter PANEL_DATA_DIR."
        )


# --- files -------------------------------------------------------------------------------------


def prepare_directory(files: BouncerFiles) -> None:
    runas.make_private_dir(files.directory, files.owner)


def write_file(files: BouncerFiles, path: Path, content: str) -> None:
    """A 0600 file of PgBouncer's user, written atomically."""
    runas.write_private_file(path, content, owner=files.owner)


def copy_private(files: BouncerFiles, source: Path, target: Path) -> None:
    """Copy a file (the cluster's TLS certificate and key) as a 0600 file of PgBouncer's user."""
    content = source.read_text()
    try:
        if target.read_text() == content:
            return
    except OSError:
        pass
    write_file(files, target, content)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def install(files: BouncerFiles, ini: str, auth: str) -> None:
    """Write both files atomically, keeping the current ones as ``.prev`` for a rollback.

    The auth file goes first: a new pool's user must be known when the new ``pgbouncer.ini``
    is loaded.
    """
    for path, content in ((files.auth, auth), (files.ini, ini)):
        current = read_text(path)
        previous = files.previous(path)
        if current is None:
            previous.unlink(missing_ok=True)
        else:
            write_file(files, previous, current)
        write_file(files, path, content)


def restore_previous(files: BouncerFiles) -> bool:
    """Put the ``.prev`` files back; False when there were none (the first configuration)."""
    restored = False
    for path in (files.ini, files.auth):
        previous = files.previous(path)
        content = read_text(previous)
        if content is None:
            path.unlink(missing_ok=True)
        else:
            write_file(files, path, content)
            restored = True
    return restored


def restart_settings(ini_text: str | None) -> dict[str, str]:
    """The values of ``RESTART_KEYS`` in an ini file's ``[pgbouncer]`` section."""
    values: dict[str, str] = {}
    section = None
    for raw in (ini_text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section == "pgbouncer" and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            if key in RESTART_KEYS:
                values[key] = value
    return values


def needs_restart(old_ini: str | None, new_ini: str) -> bool:
    return old_ini is not None and restart_settings(old_ini) != restart_settings(new_ini)


# --- the log -----------------------------------------------------------------------------------


def log_size(files: BouncerFiles) -> int:
    try:
        return files.logfile.stat().st_size
    except FileNotFoundError:
        return 0


def log_problems(files: BouncerFiles, since: int) -> list[str]:
    """WARNING/ERROR/FATAL lines PgBouncer logged since byte ``since``, the worst first."""
    try:
        with open(files.logfile, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    problems = parse_log_errors(text)
    # Client-side warnings (a client gone, a bad password) say nothing about the configuration.
    problems = [line for line in problems if " C-0x" not in line and " S-0x" not in line]
    rank = {"FATAL": 0, "ERROR": 1, "WARNING": 2}

    def level(line: str) -> int:
        return min((rank[word] for word in rank if f"] {word} " in line), default=3)

    return sorted(problems, key=level)


# --- processes ---------------------------------------------------------------------------------


def running_pid(files: BouncerFiles) -> int | None:
    """The running PgBouncer's pid from its pidfile, or None (dead, zombie, or pid reused)."""
    try:
        pid = int(files.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE or proc.name() != "pgbouncer":
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


def _run(files: BouncerFiles, args: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    # The engine's runner drops to the cluster's OS user, with a clean environment and a timeout.
    try:
        return runas.run_as(files.owner, args, timeout=timeout, cwd=files.directory)
    except EngineError as exc:
        raise SupervisorError(f"PgBouncer did not start: {exc}") from None


def _remove_stale(files: BouncerFiles) -> None:
    # After a SIGKILL the pidfile stays; if its pid were reused PgBouncer would refuse to start.
    files.pidfile.unlink(missing_ok=True)


def start(files: BouncerFiles, *, fds_needed: int, timeout: float = 10) -> int:
    """Start PgBouncer on ``files.ini`` and return its pid once it listens on TCP and the socket."""
    pid = running_pid(files)
    if pid is not None:
        return pid
    check_socket_path(files)
    _remove_stale(files)
    offset = log_size(files)
    result = _run(files, _command(files, fds_needed), timeout=timeout)
    if result.returncode != 0:
        said = log_problems(files, offset) or (result.stderr or result.stdout).strip().splitlines()[-2:]
        raise SupervisorError("PgBouncer did not start: " + " ".join(said or [f"exit {result.returncode}"]))
    deadline = time.monotonic() + timeout
    while True:
        pid = running_pid(files)
        if pid is not None and files.socket_path.exists():
            break
        if time.monotonic() > deadline:
            said = log_problems(files, offset)
            raise SupervisorError("PgBouncer did not come up: " + (" ".join(said) or "no reason logged."))
        time.sleep(0.02)
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
    deadline = time.monotonic() + timeout
    while not _exited(proc):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


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
