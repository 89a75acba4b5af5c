"""Integration: scripts/run.py (what `make run` runs) starts the panel, keeps it up, and stops what
it started. One run.py start serves the module's panel tests (in file order; the last one stops it)."""

from __future__ import annotations

import importlib.util
import os
import pwd
import re
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import psutil
import pytest
import redis

from tests.websession import WebSession

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def status_of(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


class Panel:
    """scripts/run.py in its own process group, with a fresh data directory and free ports."""

    def __init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="pgpanel-run-", dir="/tmp"))
        os.chmod(self.data_dir, 0o755)  # PostgreSQL's user must traverse it when we are root
        self.bind = f"127.0.0.1:{free_port()}"
        self.log = self.data_dir / "run.log"
        self.redis_url = f"redis://:{secrets.token_hex(8)}@127.0.0.1:{free_port()}/0"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PANEL_", "DJANGO_", "DATABASE_"))}
        env |= {
            "DJANGO_SETTINGS_MODULE": "panel.settings",
            "PANEL_DATA_DIR": str(self.data_dir),
            "PANEL_BIND": self.bind,
            # A password, as make run requires for the private Redis it starts.
            "REDIS_URL": self.redis_url,
            "PANEL_PORT_RANGE": "27900-27999",
            # Beat's log forwarding round every 2 s, not 10: the round that
            # test_beats_rounds_run_on_the_nodes_queues_through_the_seal_check awaits comes sooner.
            "PANEL_LOGSINK_SECONDS": "2",
        }
        self.env = env
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "scripts/run.py"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Restore the default: a parent shell may have started us with SIGINT ignored.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def worker_ready_count(self) -> int:
        return sum(
            1 for line in self.output().splitlines() if "worker-local@" in line and line.endswith(" ready.")
        )

    def agent_ready_count(self) -> int:
        return sum(
            1 for line in self.output().splitlines() if "agent-local@" in line and line.endswith(" ready.")
        )

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not (self.worker_ready_count() and self.agent_ready_count()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the panel did not start:\n{self.output()[-4000:]}")
            time.sleep(0.2)
        while status_of(f"http://{self.bind}/login/") != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"the web server did not answer:\n{self.output()[-4000:]}")
            time.sleep(0.2)

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.proc.pid).children(recursive=True)


CATALOGUE = ROOT / "locale" / "de" / "LC_MESSAGES" / "django.mo"


@pytest.fixture(scope="module")
def panel() -> Iterator[Panel]:
    if os.geteuid() == 0:
        # What `make messages` left before it shared the catalogue: compiled by a process of the
        # panel (umask 077), 0600 root, which the web server's user cannot read.
        os.chmod(CATALOGUE, 0o600)
    started = Panel()
    yield started
    if started.proc.poll() is None:
        os.killpg(started.proc.pid, signal.SIGKILL)
        started.proc.wait(timeout=10)
    subprocess.run(["rm", "-rf", str(started.data_dir)], check=False)


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def load_run_script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("run_script", ROOT / "scripts" / "run.py")
    assert spec is not None and spec.loader is not None
    run = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, run)  # its dataclasses look themselves up there
    spec.loader.exec_module(run)
    return run


def test_it_runs_everything(panel: Panel) -> None:
    panel.wait_ready()
    out = panel.output()
    assert "Log in at http://" + panel.bind + "/ as admin with password " in out
    assert "Starting a private Redis" in out
    names = {" ".join(p.cmdline()) for p in panel.children()}
    assert any("redis-server" in n for n in names)
    # This machine's node agent: its tasks worker (with beat's default queue) and its calls worker.
    assert any("-Q node.local.tasks,default -n worker-local@" in n for n in names)
    assert any("-Q node.local.work -n work-local@" in n for n in names)  # tenants' long work apart
    assert any("-Q node.local.backups -n backups-local@" in n for n in names)
    assert any("-Q node.local -n agent-local@" in n and "--pool threads" in n for n in names)
    assert any("celery -A panel beat" in n for n in names)
    assert any("gunicorn panel.wsgi -b " + panel.bind in n for n in names)
    assert (panel.data_dir / "redis" / "redis.log").exists()
    # gunicorn serves the collected static files too (the login page needs its CSS and htmx).
    assert status_of(f"http://{panel.bind}/static/vendor/bootstrap/bootstrap.min.css") == 200
    assert status_of(f"http://{panel.bind}/static/vendor/htmx/htmx.min.js") == 200
    assert status_of(f"http://{panel.bind}/clusters/") == 200  # after the redirect to the login page
    # WhiteNoise serves them: the pages link names with a content hash, which browsers keep a year.
    with urllib.request.urlopen(f"http://{panel.bind}/login/", timeout=5) as response:
        login_page = response.read().decode()
    hashed = re.search(r'href="(/static/css/panel\.[0-9a-f]{12}\.css)"', login_page)
    assert hashed, "the login page links the stylesheet without a content hash"
    with urllib.request.urlopen(f"http://{panel.bind}{hashed.group(1)}", timeout=5) as response:
        assert response.status == 200
        assert "immutable" in response.headers["Cache-Control"]
    # As a browser asks: the gzip copy WhiteNoise wrote, readable by a web server of its own user.
    request = urllib.request.Request(
        f"http://{panel.bind}{hashed.group(1)}", headers={"Accept-Encoding": "gzip"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200 and response.headers["Content-Encoding"] == "gzip"


def test_beats_rounds_run_on_the_nodes_queues_through_the_seal_check(panel: Panel) -> None:
    """Beat sends each round to ``default`` with an expiry; the worker fans it out, sealed anew,
    to the node's queues, where it runs (every task checks its message's seal first, issue 37)."""
    panel.wait_ready()
    fanned = re.compile(r"Task panel\.logsink\.tasks\.forward\[[0-9a-f-]+\] succeeded")
    deadline = time.monotonic() + 120
    while not fanned.search(panel.output()):
        assert panel.proc.poll() is None and time.monotonic() < deadline, panel.output()[-4000:]
        time.sleep(0.5)
    assert re.search(r"Task panel\.clusters\.tasks\.fan_out\[[0-9a-f-]+\] succeeded", panel.output())
    assert "refused the task message" not in panel.output()


def worker_main(panel: Panel) -> psutil.Process:
    return next(
        p for p in psutil.Process(panel.proc.pid).children() if "node.local.tasks,default" in p.cmdline()
    )


def test_a_killed_worker_is_restarted_and_serves_tasks_again(panel: Panel) -> None:
    panel.wait_ready()
    old = worker_main(panel)
    pool = old.children()
    assert pool  # the prefork pool processes, which must go with it
    readies = panel.worker_ready_count()
    killed_at = time.monotonic()
    old.kill()

    deadline = killed_at + 30
    while panel.worker_ready_count() == readies:
        assert panel.proc.poll() is None, panel.output()[-4000:]
        assert time.monotonic() < deadline, panel.output()[-4000:]
        time.sleep(0.2)
    assert "run    | worker exited (signal 9); restarting in 1 s" in panel.output()
    assert "run    | worker restarted (pid " in panel.output()
    new = worker_main(panel)
    assert new.pid != old.pid
    assert alive(pool) == []  # the old pool did not linger beside the new worker

    # A task round trip through the real broker, served by the new worker: sent as the panel
    # sends it, signed with its key (the workers take nothing else).
    send = "from panel.core import taskqueue; print(taskqueue.send('panel.insights.tasks.rollup', [], queue='default').id)"
    sent = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", send],
        cwd=ROOT,
        env=panel.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr
    deadline = time.monotonic() + 30
    needle = f"Task panel.insights.tasks.rollup[{sent.stdout.split()[-1]}] succeeded"
    while needle not in panel.output():
        assert time.monotonic() < deadline, panel.output()[-4000:]
        time.sleep(0.2)
    assert panel.proc.poll() is None  # the rest of the panel stayed up
    assert status_of(f"http://{panel.bind}/login/") == 200


def web_session(panel: Panel) -> WebSession:
    """The admin's session on the panel, logged in with the password make run printed."""
    password = re.search(r"as admin with password (\S+)", panel.output())
    assert password, panel.output()[-2000:]
    session = WebSession(f"http://{panel.bind}")
    session.login("admin", password.group(1))
    return session


def can_run_python_as(user: str) -> bool:
    """Whether ``user`` can run this interpreter in this checkout (make run's own probe)."""
    entry = pwd.getpwnam(user)

    def become() -> None:
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)

    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import django"], cwd=ROOT, preexec_fn=become, capture_output=True
        )
    except OSError:  # the interpreter itself is out of its reach
        return False
    return probe.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user make run serves the web as that user")
def test_as_root_the_web_runs_unprivileged_and_reaches_clusters_only_through_the_agent(panel: Panel) -> None:
    panel.wait_ready()
    web = [p for p in panel.children() if "gunicorn" in " ".join(p.cmdline())]
    assert web
    if not can_run_python_as("pgpanel"):
        # A checkout or interpreter under /root: said clearly, and the panel still serves.
        assert "WARNING: the web server runs as root: the user pgpanel cannot run" in panel.output()
        return
    uid = pwd.getpwnam("pgpanel").pw_uid
    assert {p.uids().real for p in web} == {uid} and {p.uids().effective for p in web} == {uid}
    beat = [p for p in panel.children() if "celery -A panel beat" in " ".join(p.cmdline())]
    assert beat and {p.uids().effective for p in beat} == {uid}  # it only sends tasks
    assert "The web server runs as pgpanel" in panel.output()

    env = {**panel.env, "PANEL_PROCESS_ROLE": "all"}
    made = subprocess.run(
        [sys.executable, "manage.py", "cluster", "create", "--name", "db-agent", "--plan", "db-s-1vcpu-1gb"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    shown = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from panel.clusters.models import Cluster; c = Cluster.objects.get(name='db-agent'); print(c.pk, c.pgdata)",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    cluster_id, pgdata = shown.stdout.strip().splitlines()[-1].split()  # after what the start says
    try:
        # The attack this closes: code running as the web server reads a cluster's files.
        read = subprocess.run(
            ["cat", f"{pgdata}/postgresql.conf"],
            preexec_fn=lambda: os.setuid(uid),
            capture_output=True,
            text=True,
        )
        assert read.returncode != 0 and "Permission denied" in read.stderr

        # The legitimate action beside it: a person adds a database from the Users & Databases tab.
        session = web_session(panel)
        tab = f"/clusters/{cluster_id}/users/"
        page = session.post(
            f"/clusters/{cluster_id}/databases/add/", {"database-name": "agentdb"}, referer=tab
        )
        assert "Database “agentdb” added." in page, page[-3000:]
        # The cluster's page in German, served by the web user from the shared catalogue.
        german = session.get(f"/clusters/{cluster_id}/", language="de")
        assert '<html lang="de"' in german and "Übersicht" in german, german[-3000:]
        assert "panel.core.agent.call[" in panel.output()  # the agent did it, not the web
        listed = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "-c",
                "from panel.clusters.models import Cluster; from panel.clusters.engine import dbconn\n"
                "with dbconn.admin_connection(Cluster.objects.get(name='db-agent')) as conn:\n"
                "    print([name for name, _owner in dbconn.list_databases(conn)])",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "'agentdb'" in listed.stdout, listed.stdout + listed.stderr  # on the server itself
    finally:
        subprocess.run(
            [sys.executable, "manage.py", "cluster", "delete", "db-agent", "--yes"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=180,
        )


def test_as_root_the_web_user_reads_the_german_catalogue_and_answers_in_german(panel: Panel) -> None:
    panel.wait_ready()
    request = urllib.request.Request(f"http://{panel.bind}/login/", headers={"Accept-Language": "de"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        page = response.read().decode()
    assert '<html lang="de"' in page and "Anmelden" in page, page[-2000:]
    assert "PermissionError" not in panel.output()
    if os.geteuid() == 0:
        # The start made it readable (panel/files.py: share_checkout_with_web), and the German
        # page above is what the web user read of it. Which process said "Repaired" is not
        # asserted: in a full run the other test session's manage.py (root too, the same
        # checkout) may repair it first (test_checkout_shared.py checks the report itself).
        assert stat.S_IMODE(CATALOGUE.stat().st_mode) == 0o644
    # Signed in, the cluster list (the cluster page itself is in the test above, which makes one).
    listing = web_session(panel).get("/clusters/", language="de")
    assert '<html lang="de"' in listing and "Abmelden" in listing, listing[-2000:]


def test_ctrl_c_stops_what_it_started(panel: Panel) -> None:
    panel.wait_ready()
    children = panel.children()
    started = time.monotonic()
    os.killpg(panel.proc.pid, signal.SIGINT)
    assert panel.proc.wait(timeout=20) == 0
    assert time.monotonic() - started < 10
    time.sleep(0.3)
    assert alive(children) == []
    assert "stopped; PostgreSQL clusters keep running" in panel.output()


def test_backoff_doubles_up_to_the_cap_and_starts_over_after_a_stable_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = load_run_script(monkeypatch)
    backoff = run.Backoff()
    delays = [backoff.died(now=100.0 * i, up_for=0.5) for i in range(8)]  # deaths far apart
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]
    assert backoff.died(now=900.0, up_for=run.STABLE_AFTER) == 1  # it had stayed up: start over
    quick = run.Backoff()
    assert [quick.died(now=float(i), up_for=1) for i in range(5)] == [1, 2, 4, 8, None]


def test_a_child_that_keeps_dying_stops_the_panel_with_its_last_lines(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = load_run_script(monkeypatch)
    # The real child, the real loop (scripts/children.py, which run.py loads), shorter waits.
    monkeypatch.setattr(sys.modules["children"], "FIRST_DELAY", 0.05)
    child = run.Child("beat", ["sh", "-c", "echo 'ImproperlyConfigured: bad schedule'; exit 3"])
    child.start(dict(os.environ))
    deadline = time.monotonic() + 20
    while not run.supervise(child, dict(os.environ)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    out = capsys.readouterr().out
    assert out.count("run    | beat exited (exit 3); restarting in") == run.GIVE_UP_DEATHS - 1
    assert (
        "run    | beat exited (exit 3) and died 5 times within 60 s: it cannot run, so the panel stops" in out
    )
    assert "run    |   ImproperlyConfigured: bad schedule" in out


def test_the_private_redis_takes_the_password_of_redis_url_as_clients_read_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = load_run_script(monkeypatch)
    # Percent-encoded in the URL; a quote and a backslash in the decoded password.
    url = f"redis://:p%40ss%22w%5Cord@127.0.0.1:{free_port()}/0"
    child = run.redis_child(url, tmp_path)
    child.start(dict(os.environ))
    try:
        run.wait_for_redis(url, child)
        assert redis.Redis.from_url(url, socket_timeout=2).ping()
        wrong = url.replace("p%40ss", "p%2540ss")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(wrong, socket_timeout=2).ping()
    finally:
        child.ask_to_stop()
        child.wait_stopped(time.monotonic() + 10)


def test_beat_starts_over_a_schedule_a_kill_left_unreadable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A kill while beat wrote its schedule leaves a shelve that makes every later start die at once
    ("Ran out of input"); the supervisor would give up and stop the panel. Beat starts afresh."""
    run = load_run_script(monkeypatch)
    for suffix in (".dat", ".dir", ".bak"):
        (tmp_path / f"celerybeat-schedule{suffix}").write_bytes(
            b"\x80\x04" if suffix == ".dat" else b"'entries', (0, 9)\n"
        )
    beat = run.beat_child([sys.executable, "-m", "celery", "-A", "panel"], tmp_path)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "panel.test_settings",
        "REDIS_URL": "redis://127.0.0.1:9/0",
    }
    beat.start(env)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("beat: Starting" in line for line in beat.tail):
            assert beat.proc.poll() is None, "\n".join(beat.tail)
            time.sleep(0.2)
        time.sleep(2)  # past the schedule's opening, where it died
        assert beat.proc.poll() is None, "\n".join(beat.tail)
        assert not any("Ran out of input" in line for line in beat.tail)
    finally:
        beat.proc.terminate()
        beat.proc.wait(timeout=10)
