"""The high-availability supervisor: the only module that spawns or signals Patroni and HAProxy
(a cluster with standbys), and that talks to Patroni's REST API; etcd is ``standbys/engine/etcd.py``'s,
which starts it through this module's helpers.

Every program starts from an argument list (never a shell) as the cluster's own OS user (etcd:
the panel's runner user), inside the cluster's cgroup, detached (``setsid --fork``: it outlives
the worker that started it and is nobody's zombie). A process is found again by its command line
(the configuration file it was given), so no pid file can go stale. Secrets are in the 0600
configuration files, never in argv.
"""

from __future__ import annotations

import http.client
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from panel.clusters.lib import firewall
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.core import jsonhttp
from panel.core.runas import EngineError, OsUser, run_as, spawn_in, write_private_file

log = logging.getLogger(__name__)

ETCD = "/usr/bin/etcd"
HAPROXY = "/usr/sbin/haproxy"
SETSID = "/usr/bin/setsid"
SS = "/usr/bin/ss"
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
    _gone, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(alive, timeout=5)


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


# --- HAProxy (one per cluster with standbys) ------------------------------------------------------


def haproxy_pid(config: Path) -> int | None:
    procs = _processes_with(str(config))
    return procs[0].pid if procs else None


def start_haproxy(config: Path, pidfile: Path, user: OsUser, join: Sequence[Path], *, timeout: float) -> None:
    """HAProxy in the background (``-D``) once its configuration checks (``-c``)."""
    if haproxy_pid(config) is not None:
        return
    check_haproxy(config, user, timeout=timeout)
    result = run_as(user, [HAPROXY, "-D", "-f", str(config), "-p", str(pidfile)], timeout=timeout, join=join)
    if result.returncode != 0:
        raise EngineError(f"HAProxy did not start: {(result.stderr or result.stdout).strip()}")


def write_haproxy(config: Path, text: str, sources: Sequence[str], user: OsUser) -> None:
    """HAProxy's configuration and, beside it, the trusted sources as its pattern file (``src -f``),
    each written atomically (the running HAProxy reads them again only when reloaded, after
    ``check_haproxy``)."""
    sources_file = config.with_name(haproxy_lib.HAPROXY_SOURCES)
    write_private_file(sources_file, firewall.render_haproxy_sources(sources), owner=user)
    write_private_file(config, text, owner=user)


def check_haproxy(config: Path, user: OsUser, *, timeout: float) -> None:
    """``haproxy -c``: the configuration and the files it reads (the trusted sources) as they are
    on disk now, as the user HAProxy runs as. Not ``-q``: HAProxy 2.6 then says nothing at all,
    not even its ALERT lines, and a refusal read "HAProxy refused its configuration: " (met as a
    stats socket path one byte over HAProxy's 97, in a deeper data directory); the refusal keeps
    the ALERT lines, without the NOTICE and WARNING ones."""
    check = run_as(user, [HAPROXY, "-c", "-f", str(config)], timeout=timeout)
    if check.returncode != 0:
        said = (check.stderr or check.stdout).splitlines()
        alerts = [line for line in said if "[ALERT]" in line] or said
        raise EngineError(f"HAProxy refused its configuration: {' '.join(a.strip() for a in alerts)}")


def reload_haproxy(
    config: Path, pidfile: Path, admin_socket: Path, user: OsUser, join: Sequence[Path], *, timeout: float
) -> None:
    """Load the configuration again without cutting a session: once it checks, a new HAProxy binds
    beside the old ones (SO_REUSEPORT) and ``-sf`` tells them to stop listening and leave when
    their last session ends. Not running: started."""
    old = [proc.pid for proc in _processes_with(str(config))]
    if not old:
        start_haproxy(config, pidfile, user, join, timeout=timeout)
        return
    check_haproxy(config, user, timeout=timeout)
    state = pidfile.with_name(haproxy_lib.HAPROXY_STATE)
    _save_server_state(admin_socket, state, user)
    argv = [HAPROXY, "-D", "-f", str(config), "-p", str(pidfile), "-sf", *map(str, old)]
    try:
        result = run_as(user, argv, timeout=timeout, join=join)
    finally:
        # Read once, at the start: a later start must not take stale states from it.
        state.unlink(missing_ok=True)
    if result.returncode != 0:
        raise EngineError(f"HAProxy did not reload: {(result.stderr or result.stdout).strip()}")


def _save_server_state(admin_socket: Path, state: Path, user: OsUser) -> None:
    """``show servers state`` of the running HAProxy into ``state`` (an HAProxy from before it
    had an admin socket: nothing saved, its successor learns the states from its first checks)."""
    chunks = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(REST_TIMEOUT)
            conn.connect(str(admin_socket))
            conn.sendall(b"show servers state\n")
            while chunk := conn.recv(65536):
                chunks.append(chunk)
    except OSError as exc:
        log.info("no server states from HAProxy's %s: %s", admin_socket, exc)
        return
    write_private_file(state, b"".join(chunks).decode(errors="replace"), owner=user)


def stop_haproxy(config: Path, *, timeout: float = 10) -> None:
    _terminate(_processes_with(str(config)), timeout)


def cut_clients(ports: Sequence[int], allowed: Callable[[str], bool]) -> int:
    """End the established connections to HAProxy's ``ports`` whose client address ``allowed``
    refuses (the kernel closes each socket: ``ss -K``, root only); the others are not touched.
    How many were cut."""
    cut = 0
    for conn in psutil.net_connections(kind="inet"):
        if conn.status != psutil.CONN_ESTABLISHED or not conn.raddr or conn.laddr.port not in ports:
            continue
        if allowed(conn.raddr.ip):
            continue
        here, there = conn.laddr, conn.raddr
        argv = [SS, "-K", "-t", "-n", "state", "established"]
        argv += ["src", _ss_address(here.ip), "sport", "=", f":{here.port}"]
        argv += ["dst", _ss_address(there.ip), "dport", "=", f":{there.port}"]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        if result.returncode != 0:
            log.warning("could not end a connection from %s: %s", there.ip, result.stderr.strip())
            continue
        cut += 1
    return cut


def _ss_address(ip: str) -> str:
    """An address as ``ss`` filters read it: IPv6 (v4-mapped too) in brackets."""
    return f"[{ip}]" if ":" in ip else ip


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
    answers. ``auth``: the cluster's REST user and password (``Cluster.rest_credentials``), which
    Patroni asks for on every request that changes something (401 without)."""
    headers = {"Authorization": jsonhttp.basic_auth(*auth)} if auth is not None else {}
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    return jsonhttp.exchange(conn, method, path, body, headers=headers)
