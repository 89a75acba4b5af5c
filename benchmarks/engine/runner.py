"""The benchmark runner: the only module that spawns or signals the load generators, pgbench and
sysbench (everything below says pgbench; sysbench is run, confined and stopped the same way).

pgbench runs from an argument list (never a shell), in its own session and process group (so a
cancel or the reaper can stop it and any child at once, and a dying worker does not take the
signal for it). When the panel runs as root it runs as ``settings.PANEL_BENCH_USER``, a system
user of its own that owns nothing of any cluster (not the user that runs PostgreSQL and PgBouncer):
whatever pgbench does on this machine, it cannot touch a cluster's files. Each run and each check
gets a private work directory (0700, owned by that user) for its script and transaction logs,
removed afterwards. The password comes through the environment (``PGPASSWORD``), never argv. Each
stream is read by its own thread, line by line as it arrives, with the arrival time: the caller
parses stdout and stderr separately (pgbench's interleaving of the two is not reliable).

The client is off every server's plan: a run's pgbench joins the node's clients' cgroup
(:func:`client_cgroup`, ``pgpanel-clients``: its own memory limit, no CPU quota, a CPU weight below
the panel's processes), never the cluster's, as a client on another machine would be. Its CPU time
is read from /proc as it runs and once more as it exits (:attr:`LoadProcess.cpu_s`).
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil
from django.conf import settings

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_check import ProbeOutcome
from panel.clusters.face import cgroups, postgres
from panel.core import osusers
from panel.core.polling import wait_for
from panel.core.runas import EngineError, OsUser, current_user, spawn_in

STDOUT = "stdout"
STDERR = "stderr"
PATH = "/usr/local/bin:/usr/bin:/bin"


class RunnerError(Exception):
    """pgbench could not be started; the message says why."""


@dataclass(frozen=True)
class Line:
    """One line of pgbench output, with the Unix time the runner read it."""

    stream: str
    text: str
    at: float


def load_programs() -> frozenset[str]:
    """The process names of every registered engine's program (an engine registered late too)."""
    return frozenset(Path(tool.program).name for tool in engines.ENGINES.values())


def pgbench_path(version: str | None = None) -> str:
    """pgbench of the cluster's major version when installed, else the one on PATH."""
    return _server_tool("pgbench", version)


def _server_tool(program: str, version: str | None) -> str:
    """A client program that PostgreSQL ships: the one of the cluster's major version when
    installed, else the one on PATH, else the newest under /usr/lib/postgresql."""
    if version:
        try:
            candidate = postgres.bindir_for(version) / program
        except EngineError:
            candidate = None
        if candidate is not None and candidate.is_file():
            return str(candidate)
    found = shutil.which(program)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{program}"), reverse=True):
        return str(candidate)
    return f"/usr/bin/{program}"


def program_path(engine: str, version: str | None = None) -> str:
    """The program of a load generator by its engine's name, as the engine says where it lives
    (``server_bindir``: the one of the cluster's version)."""
    tool = engines.ENGINES[engine]
    if tool.server_bindir:
        return _server_tool(tool.program, version)
    return shutil.which(tool.program, path=PATH) or f"/usr/bin/{tool.program}"


def bench_user() -> OsUser:
    """Who runs pgbench: ``settings.PANEL_BENCH_USER`` (created on first use) when the panel runs
    as root, else the panel's own user."""
    if os.geteuid() != 0:
        return current_user()
    name = settings.PANEL_BENCH_USER
    if name == settings.PANEL_RUN_AS_USER or name.startswith(settings.PANEL_CLUSTER_USER_PREFIX):
        raise RunnerError(
            f"PANEL_BENCH_USER {name!r} is a user that runs clusters; pgbench needs a user of its own "
            f"(the default is 'pgpanel-bench')."
        )
    try:
        return osusers.ensure_system_user(name)
    except EngineError as exc:
        raise RunnerError(str(exc)) from None


@dataclass(frozen=True)
class ClientGroup:
    """Where the load generators run: the clients' cgroup and its limits (none: cgroups cannot be
    written on this node, the client runs in the worker's own group)."""

    procs_files: tuple[Path, ...] = ()
    path: str = ""
    memory_bytes: int | None = None
    cpu_weight: int | None = None
    weight_of_default: int | None = None  # what a panel process weighs: 1024 (v1) or 100 (v2)


def client_cgroup() -> ClientGroup:
    """The node's clients' group, made or updated with ``settings.PANEL_BENCH_MEMORY_MB``."""
    group = cgroups.ensure_clients(settings.PANEL_BENCH_MEMORY_MB * 1024**2)
    if group is None:
        return ClientGroup()
    # The path as /proc/<pid>/cgroup shows it: in the cpu hierarchy (v1) or the unified one (v2).
    hierarchy = cgroups.ROOT / "cpu" if group.version == 1 else cgroups.ROOT
    return ClientGroup(
        procs_files=tuple(group.procs_files),
        path="/" + str(group.paths[-1].relative_to(hierarchy)),
        memory_bytes=cgroups.memory_limit(group),
        cpu_weight=cgroups.cpu_weight(group),
        weight_of_default=1024 if group.version == 1 else 100,
    )


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process and of the children it reaped (its threads included),
    from /proc; still readable while it is a zombie. None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def base_env() -> dict[str, str]:
    """A minimal environment for pgbench: nothing of the worker's own ``PG*`` variables leaks in,
    and ``HOME`` is the bench user's (no home: libpq finds no ``.pgpass`` or certificates there)."""
    return {"PATH": PATH, "HOME": bench_user().home, "LANG": "C.UTF-8"}


def make_workdir(prefix: str = "pgbench-run-") -> Path:
    """A private directory for one run (scripts, transaction logs): 0700, owned by the bench user.
    The worker, as root, still reads the logs pgbench writes there."""
    user = bench_user()
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        os.chmod(path, 0o700)
        if not user.is_self:
            os.chown(path, user.uid, user.gid)
    except OSError:
        remove_workdir(path)
        raise
    return path


def write_private(path: Path, content: str) -> None:
    """A new 0600 file the bench user owns (a custom script), in a work directory from
    :func:`make_workdir`. Never follows a link or reuses a file someone put there."""
    user = bench_user()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)
        os.fchmod(handle.fileno(), 0o600)
        if not user.is_self:
            os.fchown(handle.fileno(), user.uid, user.gid)


def read_private(path: Path) -> bytes:
    """Read a file pgbench wrote in a work directory, without following a link it may have put there."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def remove_workdir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_workdirs(prefix: str) -> int:
    """Remove the work directories ``make_workdir(prefix)`` left behind (a worker that died)."""
    found = list(Path(tempfile.gettempdir()).glob(f"{prefix}*"))
    for path in found:
        remove_workdir(path)
    return len(found)


def probe(args_in: Callable[[str], list[str]], files: Mapping[str, str], timeout_s: float) -> ProbeOutcome:
    """Run one pgbench check (see :mod:`benchmarks.lib.pgbench_check`) to completion, as the bench
    user, in a private work directory holding ``files`` (name -> text). ``args_in(workdir)`` gives
    the arguments; pgbench starts in the work directory, so its messages name files relatively."""
    try:
        workdir = make_workdir("pgbench-check-")
    except RunnerError as exc:
        return ProbeOutcome(None, "", str(exc))
    except OSError as exc:
        return ProbeOutcome(None, "", f"Could not make a work directory for pgbench: {exc.strerror or exc}.")
    try:
        for name, text in files.items():
            write_private(workdir / name, text)
        args = args_in(str(workdir))
        env = cmd.build_env(None, None, connect_timeout_s=2, base=base_env())
        try:
            proc = LoadProcess(args, env, cwd=workdir)
        except RunnerError as exc:
            return ProbeOutcome(None, "", str(exc))
        stderr: list[str] = []
        deadline = time.monotonic() + timeout_s
        while not proc.done:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.stop(grace_s=0.5)
                return ProbeOutcome(None, "".join(stderr))
            line = proc.next_line(min(remaining, 0.5))
            if line is None:
                proc.wait(min(remaining, 0.1))  # streams closed: wait for the exit, do not spin
            elif line.stream == STDERR:
                stderr.append(line.text)
        code = proc.wait(5)
        return ProbeOutcome(code if code is not None else proc.stop(grace_s=0.5), "".join(stderr))
    finally:
        remove_workdir(workdir)


class LoadProcess:
    """A running pgbench: its lines arrive on :meth:`next_line`, in the order they were read."""

    def __init__(
        self, args: Sequence[str], env: dict[str, str], *, cwd: Path | None = None, join: Sequence[Path] = ()
    ) -> None:
        # ``join``: the cluster's cgroup, so the load a tenant generates counts against its plan.
        argv, kwargs = spawn_in(bench_user(), args, join)
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=str(cwd) if cwd else "/",
                start_new_session=True,
                **kwargs,
            )
        except OSError as exc:
            # The program's name, not its path: the reason reaches the run's page.
            raise RunnerError(f"Could not run {Path(args[0]).name}: {exc.strerror or exc}.") from None
        self.pid = self._proc.pid
        self.started = time.time()
        self.ended: float | None = None
        self.cpu_s: float | None = None  # the last reading of the process's CPU time
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
            # A stream closes as the process exits and before anyone reaps it: its last CPU time.
            self.sample_cpu()
            self.ended = time.time()
            self._lines.put(None)

    def sample_cpu(self) -> float | None:
        """Read the process's CPU time now (while it runs, or exited but not yet reaped)."""
        if self._proc.returncode is None:
            found = process_cpu_seconds(self.pid)
            if found is not None and (self.cpu_s is None or found > self.cpu_s):
                self.cpu_s = found
        return self.cpu_s

    @property
    def wall_s(self) -> float:
        """Seconds from the spawn to the streams' end (or to now)."""
        return (self.ended or time.time()) - self.started

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
    """Whether ``pid`` is alive and is a pgbench or a sysbench (a pid the kernel reused is left alone)."""
    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and proc.name() in load_programs()
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
    if wait_for(lambda: not is_pgbench(pid), grace_s, interval=0.05):
        return True
    _signal_group(pid, signal.SIGKILL)
    wait_for(lambda: not is_pgbench(pid), 5, interval=0.05)
    return True


def process_alive(pid: int | None) -> bool:
    """Whether a process (a worker) with this pid exists on this machine and is not a zombie."""
    if not pid:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
