"""The high-availability supervisor: the only module that spawns or signals Patroni (a cluster
with standbys), and that talks to Patroni's REST API; etcd is ``standbys/engine/etcd.py``'s and
HAProxy ``standbys/engine/haproxy.py``'s, which start them through this module's helpers.

Every program starts from an argument list (never a shell) as the cluster's own OS user (etcd:
the panel's runner user), inside the cluster's cgroup, detached (``setsid --fork``: it outlives
the worker that started it and is nobody's zombie). A process is found again by its command line
(the configuration file it was given), so no pid file can go stale. Secrets are in the 0600
configuration files, never in argv.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from panel.core import jsonhttp
from panel.core.polling import wait_ended
from panel.core.runas import EngineError, OsUser, run_as, spawn_in

log = logging.getLogger(__name__)

ETCD = "/usr/bin/etcd"
HAPROXY = "/usr/sbin/haproxy"
SETSID = "/usr/bin/setsid"
REST_TIMEOUT = 3.0
MISSING = (
    "High availability needs etcd and HAProxy: install the etcd-server and haproxy packages "
    "(scripts/bootstrap.sh does)."
)


# Patroni with a finer stop poll (a switchover's pause); patroni_program() is what it runs.
PATRONI_RUN = Path(__file__).with_name("patroni_run.py")


def patroni_program() -> Path:
    """Patroni from the panel's own environment (it must be readable by the clusters' users)."""
    return Path(sys.executable).parent / "patroni"


def check_installed(user: OsUser) -> None:
    """etcd, HAProxy and Patroni installed, and Patroni runnable by the cluster's user: Patroni
    runs its Python again as that user, and a virtualenv it cannot read (under a 0700 home) makes
    the bootstrap hang without a word (DESIGN §7)."""
    for program in (ETCD, HAPROXY, str(patroni_program())):
        if not os.access(program, os.X_OK):
            raise EngineError(f"{MISSING} ({program} is missing.)")
    probe = run_as(user, [sys.executable, "-c", "import patroni"], timeout=60)
    if probe.returncode != 0:
        raise EngineError(
            f"The cluster's system user {user.name} cannot run Patroni from {sys.executable}: make the "
            f"panel's virtual environment and every directory above it readable by other users. "
            f"({(probe.stderr or probe.stdout).strip()[-300:]})"
        )


def _processes_with(argument: str) -> list[psutil.Process]:
    """Living processes whose command line holds ``argument`` (a configuration file's path)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        if argument in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def _detach(
    user: OsUser, argv: Sequence[str], log_file: Path, *, join: Sequence[Path] = (), env: dict | None = None
) -> None:
    """Start ``argv`` as ``user`` in the cgroups ``join`` names, in a session of its own, its
    output appended to ``log_file``; returns once it is forked off."""
    args, kwargs = spawn_in(user, [SETSID, "--fork", *argv], join)
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": user.home, "LANG": "C.UTF-8"}
    environment.update(env or {})
    with open(log_file, "ab") as out:
        if os.geteuid() == 0:
            os.chown(log_file, user.uid, user.gid)
        result = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd="/",
            timeout=30,
            umask=0o077,
            check=False,
            **kwargs,
        )
    if result.returncode != 0:
        raise EngineError(f"{Path(argv[0]).name} did not start (exit {result.returncode}); see {log_file}.")


def _terminate(procs: list[psutil.Process], timeout: float) -> None:
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            continue
    # Ended, zombies included: a daemon's reaping is init's, seconds later in a container.
    alive = wait_ended(procs, timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue
    wait_ended(alive, 5)


# --- etcd (standbys/engine/etcd.py starts it; found and stopped here too) ------------------------------


def etcd_pid(data_dir: Path) -> int | None:
    procs = _processes_with(f"--data-dir={data_dir}")
    return procs[0].pid if procs else None


def stop_etcd(data_dir: Path, *, timeout: float = 10) -> None:
    _terminate(_processes_with(f"--data-dir={data_dir}"), timeout)


# --- Patroni (one per member) ------------------------------------------------------------------


def member_pid(config: Path) -> int | None:
    """The member's Patroni, found by its configuration file."""
    procs = _processes_with(str(config))
    return procs[0].pid if procs else None


def start_member(
    config: Path, log_file: Path, user: OsUser, join: Sequence[Path], *, data_dir: str | None = None
) -> None:
    """A member's Patroni. ``data_dir``: the member's own, given to pgBackRest (which PostgreSQL's
    archive_command runs, inheriting Patroni's environment) over the cluster's ``pg1-path``, which
    names member 1's: archive-push refuses a data directory other than its ``pg1-path``."""
    if member_pid(config) is not None:
        return
    env = {"PGBACKREST_PG1_PATH": data_dir} if data_dir else None
    argv = [sys.executable, "-I", str(PATRONI_RUN), str(config)]
    _detach(user, argv, log_file, join=join, env=env)


def reload_member(config: Path) -> None:
    """SIGHUP: Patroni reads its configuration file again."""
    for proc in _processes_with(str(config)):
        try:
            proc.send_signal(signal.SIGHUP)
        except psutil.Error:
            continue


def stop_member(config: Path, *, timeout: float = 60) -> None:
    """SIGTERM Patroni, which stops its PostgreSQL (a fast shutdown) and leaves the cluster."""
    _terminate(_processes_with(str(config)), timeout)


def kill_member(config: Path, postmaster: int | None) -> None:
    """SIGKILL a member's Patroni and its postmaster together: what losing its node looks like
    (failover tests and scripts/perf/failover.py)."""
    for proc in _processes_with(str(config)):
        try:
            proc.kill()
        except psutil.Error:
            continue
    if postmaster is not None:
        kill_postmaster(postmaster)


def kill_postmaster(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


# --- REST -------------------------------------------------------------------------------------------


def rest(
    method: str,
    port: int,
    path: str,
    body: Any = None,
    *,
    timeout: float = REST_TIMEOUT,
    host: str = "127.0.0.1",
    auth: tuple[str, str] | None = None,
) -> tuple[int, str]:
    """One HTTP request to ``host``:``port`` (Patroni's or etcd's API); (0, reason) when nothing
    answers. ``auth``: the cluster's REST user and password (``credentials.rest_credentials``), which
    Patroni asks for on every request that changes something (401 without)."""
    headers = {"Authorization": jsonhttp.basic_auth(*auth)} if auth is not None else {}
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    return jsonhttp.exchange(conn, method, path, body, headers=headers)


def pending_restart(port: int, host: str) -> bool:
    """Whether the member's Patroni says PostgreSQL waits for a restart to take its settings."""
    status, text = rest("GET", port, "/patroni", host=host)
    return status == 200 and bool(json.loads(text).get("pending_restart"))


def restart(port: int, *, host: str, auth: tuple[str, str], timeout: float) -> tuple[int, str]:
    """Patroni's ``POST /restart``, which answers once PostgreSQL is back up; asked again while
    Patroni refuses (503 while it is busy with something else: a restart, a promotion) until
    ``timeout``. The last answer."""
    deadline = time.monotonic() + timeout
    while True:
        status, text = rest("POST", port, "/restart", {}, timeout=timeout, host=host, auth=auth)
        if status == 200 or time.monotonic() > deadline:
            return status, text
        time.sleep(0.5)
