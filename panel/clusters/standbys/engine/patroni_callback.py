"""Patroni's ``on_role_change`` callback of a cluster's member: when this member becomes the
primary, point the cluster's PgBouncer at it at once and make PgBouncer reload (SIGHUP).

    python -I patroni_callback.py PGBOUNCER_INI PIDFILE SOCKET_DIR PORT  ACTION ROLE SCOPE

Patroni appends ACTION, ROLE and SCOPE. It runs as the cluster's OS user, which owns PgBouncer's
files and process; it imports nothing of Django or of the panel (the panel's database and secrets
are out of its reach). The node agent's poll (standbys/services/ha.py) renders the same file from the
member rows afterwards, so this is the fast path, not the only one.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import tempfile


def repoint(ini_text: str, socket_dir: str, port: int) -> str:
    """Every ``[databases]`` line that reaches the cluster's socket directory, on ``port``."""
    pattern = re.compile(r"(host=" + re.escape(socket_dir) + r"\s+port=)\d+")
    return pattern.sub(lambda m: f"{m.group(1)}{port}", ini_text)


def main(argv: list[str]) -> int:
    if len(argv) < 6:
        return 2
    ini, pidfile, socket_dir, port, action, role = argv[:6]
    if action != "on_role_change" or role not in ("primary", "master"):
        return 0
    try:
        with open(ini) as handle:
            text = handle.read()
    except OSError:
        return 0  # the cluster has no pool (yet)
    new = repoint(text, socket_dir, int(port))
    if new != text:
        directory = os.path.dirname(ini)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".repoint-")
        with os.fdopen(fd, "w") as handle:
            handle.write(new)
        os.replace(tmp, ini)
    try:
        with open(pidfile) as handle:
            os.kill(int(handle.read().split()[0]), signal.SIGHUP)
    except (OSError, ValueError, IndexError):
        pass  # PgBouncer is not running: it reads the file when it starts
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
