"""`make run`: prepare the panel, then run Redis (if needed), Celery worker and beat, and gunicorn.

Run with the virtualenv's Python. Preparation: migrate, check, collectstatic, ensureadmin.
Then every child runs in its own session (so a Ctrl-C in the terminal reaches only this
supervisor, which stops the children in order), with its output prefixed by its name.
A child that dies on its own (a crash, an out-of-memory kill) is started again after a back-off
of 1 s, 2 s, 4 s … up to 30 s (back to 1 s once it stayed up 30 s), and the output says so.
Ctrl-C or SIGTERM stops everything started here within a few seconds; PostgreSQL clusters and
PgBouncer are not children of this script and keep running. A child that keeps dying (5 deaths
within 60 s) stops everything, with its last lines, and this script exits non-zero.

Environment: PANEL_BIND (default 127.0.0.1:8000), REDIS_URL, PANEL_DATA_DIR, and every variable
panel/settings.py reads.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import unquote, urlsplit

import redis

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
STOP_TIMEOUT = 8.0  # per child, after which it is killed with its process group
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}
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


def beat_child(celery: list[str], data_dir: Path) -> Child:
    """Celery beat. Its schedule file (a shelve: .dat, .dir, .bak) only remembers when each task
    last ran, and every task here runs every few seconds or minutes: it starts afresh each time, as a
    kill mid-write leaves it unreadable and beat would die at every start ("Ran out of input")."""
    schedule = data_dir / "celerybeat-schedule"
    return Child(
        "beat",
        [*celery, "beat", "--loglevel", "INFO", "--schedule", str(schedule)],
        scratch=[schedule],
    )


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

    def start(self, env: dict[str, str]) -> None:
        for path in self.scratch:
            for stale in path.parent.glob(path.name + "*"):
                stale.unlink(missing_ok=True)
        # A Ctrl-C between the fork and the assignment would leave a child nobody stops.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self.proc = subprocess.Popen(
                self.args,
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Safe here: the only other threads are output readers that never touch locks of ours.
                preexec_fn=_die_with_parent,
            )
            self.started_at = time.monotonic()
            self.restart_at = None
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        self.reader = threading.Thread(target=self._pump, args=(self.proc,), daemon=True)
        self.reader.start()

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.tail.append(line)
            say(self.name, line)

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


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def manage(*args: str, env: dict[str, str]) -> None:
    """Run one preparation step in the foreground; stop here if it fails."""
    result = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env)
    if result.returncode != 0:
        say("run", f"manage.py {' '.join(args)} failed (exit {result.returncode})")
        sys.exit(result.returncode)


def settings_values(env: dict[str, str]) -> dict[str, str]:
    """The data directory and Redis URL exactly as the settings resolve them."""
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'data': str(s.PANEL_DATA_DIR), 'redis': s.REDIS_URL}))"
    )
    out = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    for line in out.stderr.splitlines():  # what the settings repaired in the data directory, say
        say("run", line)
    if out.returncode != 0:
        sys.exit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def redis_answers(url: str) -> bool:
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2).ping()
    except redis.AuthenticationError:
        return True  # somebody answers; the URL lacks the password, which Celery will report
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    except redis.ResponseError as exc:
        return "NOAUTH" in str(exc)
    return True


def redis_is_open(url: str) -> bool:
    """Whether the Redis at ``url`` serves a client that gives no password (Redis 6+ accepts any
    password when it has none, so a URL with a password proves nothing)."""
    parts = urlsplit(url)
    try:
        client = redis.Redis(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            ssl=parts.scheme == "rediss",
            socket_connect_timeout=2,
            socket_timeout=2,
        )
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False


def redis_child(url: str, data_dir: Path) -> Child:
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host not in LOCAL_HOSTS:
        say("run", f"No Redis answers at {host}:{parts.port or 6379} (REDIS_URL), and it is not local.")
        sys.exit(1)
    binary = shutil.which("redis-server")
    if binary is None:
        say("run", "redis-server is not installed (apt-get install -y redis-server).")
        sys.exit(1)
    if not parts.password:
        # Every local user reaches 127.0.0.1; a broker without a password takes their tasks.
        say(
            "run",
            "REDIS_URL has no password, and make run starts its private Redis only with one. Unset "
            "REDIS_URL (the panel then keeps a generated password in <data dir>/keys/redis_password) "
            "or put one in it: redis://:PASSWORD@127.0.0.1:PORT/0",
        )
        sys.exit(1)
    redis_dir = data_dir / "redis"
    redis_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(redis_dir, 0o700)
    lines = [
        "bind 127.0.0.1",
        f"port {parts.port or 6379}",
        'save ""',
        "appendonly no",
        "daemonize no",
        f'dir "{redis_dir}"',
        f'logfile "{redis_dir / "redis.log"}"',
    ]
    # In a 0600 file, not on the command line where `ps` shows it; percent-decoded as redis-py
    # and kombu decode it, and escaped for redis.conf's double quotes.
    password = unquote(parts.password).replace("\\", "\\\\").replace('"', '\\"')
    lines.append(f'requirepass "{password}"')
    conf = redis_dir / "redis.conf"
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    return Child("redis", [binary, str(conf)])


def wait_for_redis(url: str, child: Child, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not redis_answers(url):
        assert child.proc is not None
        if child.proc.poll() is not None or time.monotonic() > deadline:
            log = Path(child.args[-1]).parent / "redis.log"
            tail = log.read_text(errors="replace").splitlines()[-5:] if log.exists() else []
            raise RuntimeError("redis-server did not start:\n" + "\n".join(tail))
        time.sleep(0.1)


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


def main() -> int:
    # As the panel's own processes do (panel/__init__.py): Redis's log and anything else written
    # from here is private. The children inherit it.
    os.umask(0o077)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")
    env["PYTHONUNBUFFERED"] = "1"
    bind = env.get("PANEL_BIND") or "127.0.0.1:8000"

    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)

    children: list[Child] = []
    status = 0
    try:
        values = settings_values(env)
        data_dir = Path(values["data"])
        redis_url = values["redis"]
        # Decided before the slow preparation, so a REDIS_URL it cannot use stops it at once.
        broker = None if redis_answers(redis_url) else redis_child(redis_url, data_dir)
        manage("migrate", "--no-input", env=env)
        manage("check", env=env)
        manage("collectstatic", "--no-input", "--verbosity", "0", env=env)
        manage("ensureadmin", "--url", f"http://{bind}/", env=env)

        if broker is None:
            say("run", f"Using the Redis that answers at {redis_url.split('@')[-1]}")
            if redis_is_open(redis_url):
                say(
                    "run",
                    f"WARNING: the Redis at {redis_url.split('@')[-1]} answers without a password: "
                    "every local user can send the workers tasks. Give it one (requirepass) and put "
                    "it in REDIS_URL, or stop it so that make run starts a private one with a password.",
                )
        else:
            say("run", f"Starting a private Redis (data and log in {data_dir / 'redis'})")
            children.append(broker)
            broker.start(env)
            wait_for_redis(redis_url, broker)

        celery = [PYTHON, "-m", "celery", "-A", "panel"]
        children += [
            Child("worker", [*celery, "worker", "-Q", "default,benchmarks", "--loglevel", "INFO"]),
            beat_child(celery, data_dir),
            Child(
                "web",
                [PYTHON, "-m", "gunicorn", "panel.wsgi", "-b", bind, "--workers", "2", "--threads", "4"]
                + ["--graceful-timeout", "5", "--access-logfile", "-"],
            ),
        ]
        for child in children:
            if child.proc is None:
                child.start(env)
        say("run", f"Panel at http://{bind}/ — press Ctrl-C to stop (clusters keep running)")

        while True:
            for child in children:
                if supervise(child, env):
                    status = 1
                    raise Stop(child.name)
            time.sleep(0.2)
    except Stop as reason:
        if status == 0:
            say("run", f"{reason}: stopping")
    except RuntimeError as exc:
        say("run", str(exc))
        status = 1
    finally:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not leave orphans
        stop_all(children)
        if children:
            say("run", "stopped; PostgreSQL clusters keep running")
    return status


if __name__ == "__main__":
    sys.exit(main())
