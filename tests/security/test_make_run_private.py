"""Issue 10, item 5: the panel's Redis wants a password, and what `make run` starts is private.

The start check warns about a `REDIS_URL` without a password (local users reach a loopback Redis
too); the default one carries a password generated into a 0600 key; `make run` refuses to start its
private Redis without one. Then one real `make run` for the module: its Redis answers `NOAUTH` to
any local user, no command line shows the password, and it leaves private files (its database,
keys, Redis files, every process under umask 077) beside public static files a web server of
another user may serve. The data directory's own modes (row 6) are
tests/security/test_private_data_dir.py.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from panel.clusters.checks import check_redis_password
from tests.fixtures.runpanel import Panel, free_port, status_of
from tests.security.private_files import ROOT, as_nobody, mode, panel_env, run_panel


def test_the_check_warns_about_a_redis_url_without_password(settings: object) -> None:
    settings.REDIS_URL = "redis://10.0.0.5:6379/0"  # type: ignore[attr-defined]
    warnings = check_redis_password(None)
    assert [w.id for w in warnings] == ["clusters.W011"]
    assert "10.0.0.5:6379" in warnings[0].msg and "requirepass" in warnings[0].hint
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"  # type: ignore[attr-defined]
    assert [w.id for w in check_redis_password(None)] == ["clusters.W011"]  # local users reach it too
    settings.REDIS_URL = "redis://:s3cret@10.0.0.5:6379/0"  # type: ignore[attr-defined]
    assert check_redis_password(None) == []


def test_the_default_redis_url_carries_a_generated_password_kept_0600(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    code = "import django; django.setup(); from django.conf import settings; print(settings.REDIS_URL)"
    first = run_panel(data_dir, "-c", code)
    second = run_panel(data_dir, "-c", code)
    password = (data_dir / "keys" / "redis_password").read_text().strip()
    assert len(password) >= 32
    assert first.stdout.strip() == second.stdout.strip() == f"redis://:{password}@127.0.0.1:6379/0"
    assert mode(data_dir / "keys" / "redis_password") == 0o600


def test_make_run_refuses_to_start_a_redis_without_a_password(tmp_path: Path) -> None:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "scripts/run.py"],
        cwd=ROOT,
        env=panel_env(tmp_path / "data", REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "REDIS_URL has no password, and make run starts its private Redis only with one" in out.stdout
    assert time.monotonic() - started < 20  # before migrations and the rest
    assert not (tmp_path / "data" / "redis").exists()


@pytest.fixture(scope="module")
def running_panel() -> Iterator[Panel]:
    """`make run` once for the checks below, with the password in REDIS_URL as an operator sets it."""
    started = Panel()
    started.wait_ready()
    yield started
    if started.proc.poll() is None:
        os.killpg(started.proc.pid, signal.SIGINT)
        try:
            started.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(started.proc.pid, signal.SIGKILL)
            started.proc.wait(timeout=10)
    subprocess.run(["rm", "-rf", str(started.data_dir)], check=False, timeout=60)


def redis_url_of(panel: Panel) -> str:
    redis_child = next(p for p in panel.children() if "redis-server" in p.name())
    port = next(c.laddr.port for c in redis_child.net_connections("tcp") if c.status == psutil.CONN_LISTEN)
    conf = (panel.data_dir / "redis" / "redis.conf").read_text()
    password = conf.split('requirepass "', 1)[1].split('"', 1)[0]
    return f"redis://:{password}@127.0.0.1:{port}/0"


@pytest.mark.integration
def test_make_run_private_redis_wants_the_password_which_no_command_line_shows(running_panel: Panel) -> None:
    url = redis_url_of(running_panel)
    password = url.split(":", 2)[2].split("@", 1)[0]
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    # What any local user can do: connect and send a command, no password.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"LPUSH default x\r\n")
        assert sock.recv(200).startswith(b"-NOAUTH Authentication required")
    without = url.replace(f":{password}@", "")
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(without, socket_timeout=2, protocol=2).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(url.replace(password, secrets.token_hex(8)), socket_timeout=2).ping()
    assert redis.Redis.from_url(url, socket_timeout=2).ping()  # the panel's own clients get in
    for proc in psutil.process_iter(["pid", "cmdline"]):
        assert password not in " ".join(proc.info["cmdline"] or []), proc.info
    redis_dir = running_panel.data_dir / "redis"
    assert (mode(redis_dir), mode(redis_dir / "redis.conf"), mode(redis_dir / "redis.log")) == (
        0o700,
        0o600,
        0o600,
    )


@pytest.mark.integration
def test_make_run_leaves_private_files_and_public_static_files(running_panel: Panel) -> None:
    data = running_panel.data_dir
    assert f"Repaired: {data}: mode 0755 changed to 0711" in running_panel.output()  # Panel() made it 0755
    assert mode(data) == 0o711
    schedule = list((data / "db").glob("celerybeat-schedule*"))  # shelve adds .db, or .dat/.dir/.bak
    assert schedule
    db = data / "db" / "panel.sqlite3"
    for path in [db, *schedule]:
        assert mode(path) == 0o600, path
    # The keys: root's alone, or readable by the group of the web server's own user when it has one.
    shared = "The web server runs as pgpanel" in running_panel.output()
    for path in (data / "keys").iterdir():
        assert mode(path) == (0o640 if shared else 0o600), path
    for suffix in ("-wal", "-shm"):  # the web server and the workers keep them open
        if Path(f"{db}{suffix}").exists():
            assert mode(Path(f"{db}{suffix}")) == 0o600
    # Static files are public (served without login) and readable by a web server of another user.
    static = data / "staticfiles"
    assert mode(static) == 0o755
    assert mode(static / "vendor" / "htmx" / "htmx.min.js") == 0o644
    # The gzip copies too (WhiteNoise writes them itself, under umask 077).
    assert {mode(path) for path in static.rglob("*") if path.is_file()} == {0o644}
    assert status_of(f"http://{running_panel.bind}/static/vendor/htmx/htmx.min.js") == 200
    # Every process make run started works with umask 077 (their children inherit it).
    for proc in running_panel.children():
        umask_line = next(
            line
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
            if line.startswith("Umask:")
        )
        assert umask_line.split()[1] == "0077", (proc.cmdline(), umask_line)
    if os.geteuid() == 0:
        assert "Permission denied" in as_nobody("cat", str(db)).stderr
        assert "Permission denied" in as_nobody("ls", str(data)).stderr
