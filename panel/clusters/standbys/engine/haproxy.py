"""HAProxy in front of a cluster's members (one per cluster with standbys on its node, and one at
the cluster's entry on every other node holding a member): the only module that starts, checks,
reloads or stops it, and that ends connections of clients no longer trusted (``ss -K``). Its
configuration is ``standbys/lib/haproxy.py``'s; processes are found and detached by
``standbys/engine/patroni.py``'s helpers, by the configuration file on their command line.
"""

from __future__ import annotations

import logging
import socket
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from panel.clusters.lib import firewall
from panel.clusters.standbys.engine.patroni import HAPROXY, REST_TIMEOUT, _processes_with, _terminate
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.core.runas import EngineError, OsUser, run_as, write_private_file

log = logging.getLogger(__name__)

SS = "/usr/bin/ss"


def pid(config: Path) -> int | None:
    procs = _processes_with(str(config))
    return procs[0].pid if procs else None


def start(config: Path, pidfile: Path, user: OsUser, join: Sequence[Path], *, timeout: float) -> None:
    """HAProxy in the background (``-D``) once its configuration checks (``-c``)."""
    if pid(config) is not None:
        return
    check(config, user, timeout=timeout)
    result = run_as(user, [HAPROXY, "-D", "-f", str(config), "-p", str(pidfile)], timeout=timeout, join=join)
    if result.returncode != 0:
        raise EngineError(f"HAProxy did not start: {(result.stderr or result.stdout).strip()}")


def write(config: Path, text: str, sources: Sequence[str], user: OsUser) -> None:
    """HAProxy's configuration and, beside it, the trusted sources as its pattern file (``src -f``),
    each written atomically (the running HAProxy reads them again only when reloaded, after
    ``check``)."""
    sources_file = config.with_name(haproxy_lib.HAPROXY_SOURCES)
    write_private_file(sources_file, firewall.render_haproxy_sources(sources), owner=user)
    write_private_file(config, text, owner=user)


def check(config: Path, user: OsUser, *, timeout: float) -> None:
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


def reload(
    config: Path, pidfile: Path, admin_socket: Path, user: OsUser, join: Sequence[Path], *, timeout: float
) -> None:
    """Load the configuration again without cutting a session: once it checks, a new HAProxy binds
    beside the old ones (SO_REUSEPORT) and ``-sf`` tells them to stop listening and leave when
    their last session ends. Not running: started."""
    old = [proc.pid for proc in _processes_with(str(config))]
    if not old:
        start(config, pidfile, user, join, timeout=timeout)
        return
    check(config, user, timeout=timeout)
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


def stop(config: Path, *, timeout: float = 10) -> None:
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
