"""The floating address's follower on this node (``vip_follow.py``): the only module that spawns
or signals it, and that takes a cluster's floating address off an interface (``standbys/lib/vip.py``
renders its configuration).

One follower per member of a cluster with a floating address, run as root: adding an address to
an interface needs CAP_NET_ADMIN. Detached (``setsid --fork``), its output appended to a log
file, found again by its configuration file on its command line. That file holds the scope's
etcd password, so it is root's, 0600, in a directory no cluster's user can enter.

The follower takes the address off when it is stopped (SIGTERM); ``stop`` takes it off too when
it is still there (a follower that had to be killed), so a member no longer followed does not
keep answering for the cluster.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from panel.clusters.standbys.engine import vip_follow
from panel.clusters.standbys.engine.patroni import _detach, _processes_with, _terminate
from panel.clusters.standbys.lib.vip import FloatingAddress
from panel.core.runas import EngineError, current_user

SCRIPT = Path(vip_follow.__file__)
IP = ("/usr/sbin/ip",)
STOP_TIMEOUT = 5.0
IP_TIMEOUT = 10.0


def argv(config: Path, python: str = sys.executable) -> list[str]:
    """The follower reading everything from ``config`` (no secret in argv), in an isolated
    Python (``-I``: no user site, no environment, not the working directory on its path)."""
    return [python, "-I", str(SCRIPT), f"--config={config}"]


def pid(config: Path) -> int | None:
    procs = _processes_with(f"--config={config}")
    return procs[0].pid if procs else None


def is_running(config: Path) -> bool:
    return pid(config) is not None


def start(config: Path, log_file: Path) -> None:
    """The follower of the member ``config`` describes, unless one runs for it already."""
    if is_running(config):
        return
    _detach(current_user(), argv(config), log_file)


def stop(config: Path, address: FloatingAddress | None, interface: str, *, ip: Sequence[str] = IP) -> None:
    """The follower of ``config`` stopped, then ``address`` taken off ``interface`` if it is still
    there (``ip``: the command, e.g. ``ip -n NS`` for another network namespace)."""
    _terminate(_processes_with(f"--config={config}"), STOP_TIMEOUT)
    if address is not None and holds(address, interface, ip=ip):
        _ip(ip, ["address", "del", str(address), "dev", interface])


def holds(address: FloatingAddress, interface: str, *, ip: Sequence[str] = IP) -> bool:
    """Whether ``interface`` has ``address`` now (False when the interface does not exist)."""
    result = subprocess.run(
        [*ip, "-o", "-4", "address", "show", "dev", interface],
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        return False
    return vip_follow.shows(result.stdout, str(address))


def _ip(ip: Sequence[str], args: list[str]) -> None:
    result = subprocess.run([*ip, *args], capture_output=True, text=True, timeout=IP_TIMEOUT, check=False)
    if result.returncode != 0:
        raise EngineError(f"ip {' '.join(args)} failed: {result.stderr.strip()}")
