"""`make run`: prepare the panel, then run Redis (if needed), Celery worker and beat, and gunicorn.

Run with the virtualenv's Python; the supervising itself is scripts/children.py. Preparation: migrate, check, collectstatic, ensureadmin
(``manage.py prepare``: one process, which loads Django once).
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

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))  # children.py, also when loaded by path

from children import (  # noqa: E402
    GIVE_UP_DEATHS,
    GIVE_UP_WINDOW,
    ROOT,
    STABLE_AFTER,
    STOP_SIGNALS,
    Backoff,
    Child,
    GaveUp,
    Stop,
    become,
    node_agent_children,
    on_signal,
    say,
    shut_down,
    supervise,
    supervisor_env,
    watch,
)

__all__ = ["GIVE_UP_DEATHS", "GIVE_UP_WINDOW", "STABLE_AFTER", "Backoff", "Child", "supervise"]

PYTHON = sys.executable
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


def beat_child(celery: list[str], directory: Path, user: tuple[int, int] | None = None) -> Child:
    """Celery beat, which only sends tasks: as the web server's user when it has one, its schedule
    in ``directory`` (db/, that user's). The schedule file (a shelve: .dat, .dir, .bak) only
    remembers when each task last ran, and every task here runs every few seconds or minutes: it
    starts afresh each time, as a kill mid-write leaves it unreadable and beat would die at every
    start ("Ran out of input")."""
    schedule = directory / "celerybeat-schedule"
    return Child(
        "beat",
        [*celery, "beat", "--loglevel", "INFO", "--schedule", str(schedule)],
        scratch=[schedule],
        extra_env={"PANEL_PROCESS_ROLE": "web"},
        user=user,
    )


def web_child(bind: str, user: tuple[int, int] | None = None) -> Child:
    """gunicorn serving the panel on ``bind`` (host:port), as the web server's user when it has
    one (see web_user)."""
    return Child(
        "web",
        [PYTHON, "-m", "gunicorn", "panel.wsgi", "-b", bind, "--workers", "2", "--threads", "4"]
        + ["--graceful-timeout", "5", "--access-logfile", "-", "--no-control-socket"],
        extra_env={"PANEL_PROCESS_ROLE": "web"},
        user=user,
    )


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
        "print(json.dumps({'data': str(s.PANEL_DATA_DIR), 'redis': s.REDIS_URL, 'node': s.PANEL_NODE_NAME}))"
    )
    out = subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    for line in out.stderr.splitlines():  # what the settings repaired in the data directory, say
        say("run", line)
    if out.returncode != 0:
        sys.exit(out.returncode)
    return json.loads(out.stdout.strip().splitlines()[-1])


def web_user(env: dict[str, str]) -> tuple[int, int] | None:
    """As root, the unprivileged user the web server runs as (manage.py webuser prepares it);
    None, with the reason said, when the web server must run as this process's user."""
    if os.geteuid() != 0:
        return None
    out = subprocess.run([PYTHON, "manage.py", "webuser"], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        say("run", f"manage.py webuser failed: {out.stderr.strip()[-500:]}")
        sys.exit(out.returncode)
    user = json.loads(out.stdout.strip().splitlines()[-1])
    uid, gid = int(user["uid"]), int(user["gid"])

    try:
        probe = subprocess.run(
            [PYTHON, "-c", "import django, gunicorn, panel"],
            cwd=ROOT,
            env=env,
            preexec_fn=lambda: become(uid, gid),
            capture_output=True,
        )
        reachable = probe.returncode == 0
    except OSError:  # the interpreter itself is out of its reach
        reachable = False
    if not reachable:
        say(
            "run",
            f"WARNING: the web server runs as root: the user {user['user']} cannot run {PYTHON} in "
            f"{ROOT} (a checkout or a Python under a directory only root may enter, such as /root). "
            "Clone the panel under a directory others may traverse (e.g. /srv or /opt) and build "
            ".venv with Debian's python3 to have it served unprivileged.",
        )
        return None
    manage("webuser", "--share", env=env)
    say("run", f"The web server runs as {user['user']} (uid {uid}); cluster work goes to the node agent")
    return uid, gid


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


def main() -> int:
    env = supervisor_env()  # Redis's log and anything else written from here is private
    bind = env.get("PANEL_BIND") or "127.0.0.1:8000"

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)

    children: list[Child] = []
    status = 0
    try:
        values = settings_values(env)
        data_dir = Path(values["data"])
        # Every child uses this data directory, whichever user it runs as: as root the default
        # is /var/lib/pgpanel, for another user ./var.
        env["PANEL_DATA_DIR"] = str(data_dir)
        redis_url = values["redis"]
        # Decided before the slow preparation, so a REDIS_URL it cannot use stops it at once.
        broker = None if redis_answers(redis_url) else redis_child(redis_url, data_dir)
        manage("prepare", "--url", f"http://{bind}/", env=env)  # migrate, check, collectstatic, ensureadmin
        web_as = web_user(env)

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
        # This machine's node agent (scripts/node_agent.py runs the same on another machine).
        children += node_agent_children(PYTHON, values["node"])
        children += [beat_child(celery, data_dir / "db", web_as), web_child(bind, web_as)]
        for child in children:
            if child.proc is None:
                child.start(env)
        say("run", f"Panel at http://{bind}/ — press Ctrl-C to stop (clusters keep running)")
        watch(children, env)
    except GaveUp:
        status = 1
    except Stop as reason:
        say("run", f"{reason}: stopping")
    except RuntimeError as exc:
        say("run", str(exc))
        status = 1
    finally:
        shut_down(children)
        if children:
            say("run", "stopped; PostgreSQL clusters keep running")
    return status


if __name__ == "__main__":
    sys.exit(main())
