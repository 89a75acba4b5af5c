"""The pgbench runner: the only module that spawns or signals pgbench processes.

pgbench runs from an argument list (never a shell), in its own session and process group (so a
cancel or the reaper can stop it and any child at once, and a dying worker does not take the
signal for it), as the unprivileged OS user when the panel runs as root. The password comes
through the environment (``PGPASSWORD``), never argv. Each stream is read by its own thread, line
by line as it arrives, with the arrival time: the caller parses stdout and stderr separately
(pgbench's interleaving of the two is not reliable).
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from panel.clusters.engine import postgres

STDOUT = "stdout"
STDERR = "stderr"
DEFAULT_PGBENCH = "/usr/bin/pgbench"


class RunnerError(Exception):
    """pgbench could not be started; the message says why."""


@dataclass(frozen=True)
class Line:
    """One line of pgbench output, with the Unix time the runner read it."""

    stream: str
    text: str
    at: float


def pgbench_path(version: str | None = None) -> str:
    """pgbench of the cluster's major version when installed, else the one on PATH."""
    if version:
        try:
            candidate = postgres.bindir_for(version) / "pgbench"
        except postgres.EngineError:
            candidate = None
        if candidate is not None and candidate.is_file():
            return str(candidate)
    found = shutil.which("pgbench")
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin/pgbench"), reverse=True):
        return str(candidate)
    return DEFAULT_PGBENCH


def base_env() -> dict[str, str]:
    """A minimal environment for pgbench: nothing of the worker's own ``PG*`` variables leaks in."""
    user = postgres.os_user()
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": user.home, "LANG": "C.UTF-8"}


def make_workdir(prefix: str = "pgbench-run-") -> Path:
    """A private directory for one run (scripts, transaction logs), owned by whoever runs pgbench."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    postgres.make_private_dir(path)
    return path


def write_private(path: Path, content: str) -> None:
    """A 0600 file the pgbench user can read (a custom script, a passfile)."""
    postgres.write_private_file(path, content)


def remove_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_workdirs(prefix: str) -> int:
    """Remove the work directories ``make_workdir(prefix)`` left behind (a worker that died)."""
    found = list(Path(tempfile.gettempdir()).glob(f"{prefix}*"))
    for path in found:
        remove_workdir(path)
    return len(found)


class PgbenchProcess:
    """A running pgbench: its lines arrive on :meth:`next_line`, in the order they were read."""

    def __init__(self, args: Sequence[str], env: dict[str, str], *, cwd: Path | None = None) -> None:
        kwargs = postgres.os_user().spawn_options()
        try:
            self._proc = subprocess.Popen(
                list(args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=str(cwd) if cwd else "/",
                start_new_session=True,
                **kwargs,  # type: ignore[arg-type]
            )
        except OSError as exc:
            raise RunnerError(f"Could not run {args[0]}: {exc.strerror or exc}.") from None
        self.pid = self._proc.pid
        self.started = time.time()
        self._lines: queue.Queue[Line | None] = queue.Queue()
        self._open_streams = 2
        assert self._proc.stdout is not None and self._proc.stderr is not None
        for name, stream in ((STDOUT, self._proc.stdout), (STDERR, self._proc.stderr)):
            threading.Thread(
                target=self._read, args=(name, stream), daemon=True, name=f"pgbench-{name}"
            ).start()

    def _read(self, name: str, stream: IO[bytes]) -> None:
        try:
            for raw in iter(stream.readline, b""):
                self._lines.put(Line(name, raw.decode("utf-8", errors="replace"), time.time()))
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def next_line(self, timeout: float) -> Line | None:
        """The next line, or None after ``timeout`` seconds (or once both streams are closed)."""
        if self._open_streams == 0:
            return None
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                item = self._lines.get(timeout=remaining)
            except queue.Empty:
                return None
            if item is not None:
                return item
            self._open_streams -= 1
            if self._open_streams == 0:
                return None

    def poll(self) -> int | None:
        return self._proc.poll()

    @property
    def done(self) -> bool:
        """Both streams read to the end and the process has exited."""
        return self._open_streams == 0 and self._proc.poll() is not None

    def wait(self, timeout: float) -> int | None:
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 1.5) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; the exit code (negative: signal)."""
        _signal_group(self.pid, signal.SIGTERM)
        code = self.wait(grace_s)
        if code is None:
            _signal_group(self.pid, signal.SIGKILL)
            code = self.wait(5)
        return code


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def is_pgbench(pid: int | None) -> bool:
    """Whether ``pid`` is alive and is a pgbench (a pid the kernel reused is left alone)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.name() == "pgbench"
    except psutil.Error:
        return False


def kill_group(pid: int | None, *, grace_s: float = 1.5) -> bool:
    """Stop the pgbench whose process group is ``pid`` (it leads its own session): SIGTERM, then
    SIGKILL after ``grace_s``. Returns whether a pgbench was found. Used by cancel and the reaper,
    from any process on this machine."""
    if not is_pgbench(pid):
        return False
    assert pid is not None
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not is_pgbench(pid):
            return True
        time.sleep(0.05)
    _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_pgbench(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def process_alive(pid: int | None) -> bool:
    """Whether a process (a worker) with this pid exists on this machine and is not a zombie."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
