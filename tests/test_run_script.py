"""Integration: scripts/run.py (what `make run` runs) starts the panel, keeps it up, and stops what
it started. One run.py start serves the module's panel tests (in file order; the last one stops it).
run.py's pieces on their own (the supervisor's back-off, the private Redis, beat's schedule):
tests/test_run_children.py."""

from __future__ import annotations

import os
import pwd
import re
import signal
import stat
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import psutil
import pytest

from tests.fixtures.runpanel import ROOT, Panel, status_of
from tests.websession import WebSession

pytestmark = pytest.mark.integration


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
