"""Patroni's ``before_stop`` script of a cluster's member: during a switchover, hold the primary's
stop until the panel has paused the cluster's pools.

    python -I patroni_before_stop.py SOCKET_DIR

Patroni runs it synchronously right before it signals PostgreSQL to stop (after its own
CHECKPOINT), on every stop. When the panel has left ``.switchover-pending`` in the cluster's
socket directory, the script says ``.switchover-stopping`` and waits until the panel has paused
the pools and removed the pending file (at most ``WAIT`` seconds): the pools' clients keep
working while Patroni takes the switchover request, asks the other members and checkpoints, and
wait only from here. Any other stop goes on at once. It runs as the cluster's OS user and imports
nothing of the panel.
"""

from __future__ import annotations

import os
import sys
import time

PENDING = ".switchover-pending"
STOPPING = ".switchover-stopping"
WAIT = 10.0
STALE = 120.0  # a pending file this old is a panel that died mid-switchover: not waited for


def main(argv: list[str]) -> int:
    if not argv:
        return 2
    pending = os.path.join(argv[0], PENDING)
    try:
        if time.time() - os.stat(pending).st_mtime > STALE:
            return 0
    except OSError:
        return 0  # no switchover: an ordinary stop
    with open(os.path.join(argv[0], STOPPING), "w") as handle:
        handle.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + WAIT
    while os.path.exists(pending) and time.monotonic() < deadline:
        time.sleep(0.01)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
