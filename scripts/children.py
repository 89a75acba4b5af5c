"""The supervisor under `make run` (scripts/run.py): children started in their own session, their
output prefixed by their name, restarted with a back-off when they die, stopped in order.

A child that dies on its own (a crash, an out-of-memory kill) is started again after a back-off
of 1 s, 2 s, 4 s … up to 30 s (back to 1 s once it stayed up 30 s), and the output says so.
A child that keeps dying (5 deaths within 60 s) stops everything, with its last lines.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT = 8.0  # per child, after which it is killed with its process group
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Restarting a dead child: the first delay, doubled each death up to the cap; a child that stayed
# up STABLE_AFTER seconds starts over at the first delay. GIVE_UP_DEATHS deaths within
# GIVE_UP_WINDOW seconds mean it cannot run (a broken setting, a full disk): stop everything.
FIRST_DELAY = 1.0
MAX_DELAY = 30.0
STABLE_AFTER = 30.0
GIVE_UP_DEATHS = 5
GIVE_UP_WINDOW = 60.0
TAIL_LINES = 15

_print_lock = threading.Lock()


def say(name: str, line: str) -> None:
    with _print_lock:
        sys.stdout.write(f"{name:<7}| {line}\n")
        sys.stdout.flush()


def become(uid: int, gid: int) -> None:
    """In a child started as root: this user and group, none of root's supplementary groups."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _die_with_parent() -> None:
    """In the child: get SIGTERM if this supervisor dies without stopping it (SIGKILL, crash);
    and take the stop signals again, which the supervisor blocks while it starts a child."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Backoff:
    """When to start a dead child again, and when to give up on it."""

    delay: float = 0.0  # the last delay given; 0 before the first death
    deaths: collections.deque[float] = field(default_factory=collections.deque)

    def died(self, now: float, up_for: float) -> float | None:
        """The delay before the next start, or None when the child keeps dying."""
        self.deaths.append(now)
        while now - self.deaths[0] > GIVE_UP_WINDOW:
            self.deaths.popleft()
        if len(self.deaths) >= GIVE_UP_DEATHS:
            return None
        if up_for >= STABLE_AFTER:
            self.delay = 0.0
        self.delay = FIRST_DELAY if self.delay == 0.0 else min(MAX_DELAY, self.delay * 2)
        return self.delay


def how_it_ended(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit {code}"


@dataclass
class Child:
    """One supervised program: its argument list and, once started, its process."""

    name: str
    args: list[str]
    proc: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = field(default=None, repr=False)
    started_at: float = 0.0
    restart_at: float | None = None  # set while it waits out its back-off
    backoff: Backoff = field(default_factory=Backoff)
    tail: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=TAIL_LINES))
    # Files the program rebuilds from scratch, removed before each start (see beat_child).
    scratch: list[Path] = field(default_factory=list)
    # What this child adds to the environment, and the (uid, gid) it runs as when not ours.
    extra_env: dict[str, str] = field(default_factory=dict)
    user: tuple[int, int] | None = None
    # Where its lines go when not to this supervisor's output (a harness that runs it beside
    # other output: tests/fixtures/nsweb.py); appended to, as the program writes them.
    log: Path | None = None

    def start(self, env: dict[str, str]) -> None:
        for path in self.scratch:
            for stale in path.parent.glob(path.name + "*"):
                stale.unlink(missing_ok=True)
        # A Ctrl-C between the fork and the assignment would leave a child nobody stops.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        user = self.user

        def prepare() -> None:
            if user is not None:
                become(*user)  # before PR_SET_PDEATHSIG, which a change of credentials clears
            _die_with_parent()

        try:
            self.proc = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env={**env, **self.extra_env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Safe here: the only other threads are output readers that never touch locks of ours.
                preexec_fn=prepare,
            )
            self.started_at = time.monotonic()
            self.restart_at = None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.reader = threading.Thread(target=self._pump, args=(self.proc,), daemon=True)
        self.reader.start()

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with open(self.log, "a") if self.log is not None else contextlib.nullcontext() as out:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.tail.append(line)
                if out is None:
                    say(self.name, line)
                else:
                    out.write(line + "\n")
                    out.flush()

    def reap(self) -> None:
        """After its main process died: kill what it left in its process group (a worker's pool
        processes), so the new one starts alone, and finish reading its output."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.reader is not None:
            self.reader.join(timeout=2)

    def ask_to_stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)

    def wait_stopped(self, deadline: float) -> None:
        """Wait for the exit; past the deadline kill the whole process group (pool workers too)."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say("run", f"{self.name} did not stop within {STOP_TIMEOUT:.0f} s; killing it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        if self.reader is not None:
            self.reader.join(timeout=2)


def stop_all(children: list[Child]) -> None:
    """Web, beat and worker together, then the broker (the worker needs it to shut down)."""
    first = [c for c in children if c.name != "redis"]
    last = [c for c in children if c.name == "redis"]
    for group in (first, last):
        for child in group:
            child.ask_to_stop()
        deadline = time.monotonic() + STOP_TIMEOUT
        for child in group:
            child.wait_stopped(deadline)


class Stop(Exception):
    """Raised in the main thread by the signal handler."""


def on_signal(signum: int, _frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def supervise(child: Child, env: dict[str, str]) -> bool:
    """One look at a child: start it again when its back-off is over, notice when it died.
    True when it keeps dying and everything must stop."""
    now = time.monotonic()
    if child.restart_at is not None:
        if now >= child.restart_at:
            child.start(env)
            say("run", f"{child.name} restarted (pid {child.proc.pid if child.proc else '?'})")
        return False
    assert child.proc is not None
    code = child.proc.poll()
    if code is None:
        return False
    child.reap()
    delay = child.backoff.died(now, up_for=now - child.started_at)
    if delay is None:
        say(
            "run",
            f"{child.name} exited ({how_it_ended(code)}) and died {GIVE_UP_DEATHS} times within "
            f"{GIVE_UP_WINDOW:.0f} s: it cannot run, so the panel stops. Its last lines:",
        )
        for line in child.tail:
            say("run", f"  {line}")
        return True
    say("run", f"{child.name} exited ({how_it_ended(code)}); restarting in {delay:g} s")
    child.restart_at = now + delay
    return False


def supervisor_env() -> dict[str, str]:
    """The environment a supervisor gives its children (Django's settings, unbuffered output);
    and its umask, as the panel's own processes have (panel/__init__.py): what it and they write
    is private."""
    os.umask(0o077)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def node_agent_children(python: str, node: str) -> list[Child]:
    """The node agent of ``node``: four Celery workers on its machine. ``worker`` (processes)
    takes the node's control work from ``node.<node>.tasks`` (provisioning, start/stop, delete,
    collection, quota cycles, reconciling) and beat's fan-outs from ``default``; ``work``
    (processes) the tenants' long work from ``node.<node>.work`` (data sets, benchmarks) and
    ``backups`` backups and restores from ``node.<node>.backups``, so that no tenant's work,
    however long or stuck, holds up the control work or another tenant's backup; ``agent``
    (threads of its own) answers the web's calls on ``node.<node>`` and sends the node's
    heartbeat."""
    # Without mingle: at its start a worker would wait a second for the others' revoked task ids
    # and clocks, and the panel revokes no task and asks its workers nothing over the broker.
    celery = [python, "-m", "celery", "-A", "panel", "worker", "--loglevel", "INFO", "--without-mingle"]
    env = {"PANEL_NODE_NAME": node}
    return [
        Child(
            "worker",
            [*celery, "-Q", f"node.{node}.tasks,default", "-n", f"worker-{node}@%h"],
            extra_env=env,
        ),
        Child(
            "work",
            [*celery, "-Q", f"node.{node}.work", "-n", f"work-{node}@%h", "--concurrency", "2"],
            extra_env=env,
        ),
        Child(
            "backups",
            [*celery, "-Q", f"node.{node}.backups", "-n", f"backups-{node}@%h", "--concurrency", "1"],
            extra_env=env,
        ),
        Child(
            "agent",
            [
                *celery,
                "-Q",
                f"node.{node}",
                "-n",
                f"agent-{node}@%h",
                "--pool",
                "threads",
                "--concurrency",
                "8",
            ],
            extra_env={**env, "PANEL_PROCESS_ROLE": "agent"},
        ),
    ]


class GaveUp(Stop):
    """A child kept dying: everything stops, and the supervisor exits non-zero."""


def watch(children: list[Child], env: dict[str, str]) -> None:
    """Supervise the started children until a signal (Stop) or one of them keeps dying (GaveUp)."""
    while True:
        for child in children:
            if supervise(child, env):
                raise GaveUp(child.name)
        time.sleep(0.2)


def shut_down(children: list[Child]) -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not leave orphans
    stop_all(children)


def run_until_stopped(children: list[Child], env: dict[str, str]) -> int:
    """Start the children and watch them until a signal (exit 0) or one keeps dying (exit 1);
    stop them all either way."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)
    try:
        for child in children:
            child.start(env)
        watch(children, env)
    except GaveUp:
        return 1
    except Stop as reason:
        say("run", f"{reason}: stopping")
    finally:
        shut_down(children)
    return 0
