"""The pools paused at the last moment of a switchover: Patroni's ``before_stop`` script
(``standbys/engine/patroni_before_stop.py``) holds the old primary's stop until the panel has paused them.

Before: PAUSE, then Patroni's ``POST /switchover``; the pools' clients waited while Patroni took
the request, asked the other members, checkpointed and only then stopped the old primary (0.5–2 s
on this loaded machine before the stop began). Now the panel leaves a pending file, asks Patroni,
waits for the script's word that the stop is next, pauses the pools, and removes the pending
file: the clients wait only for the stop, the promotion and PgBouncer's repointing.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from panel.clusters.models import Cluster
from panel.clusters.standbys.engine import patroni_before_stop

log = logging.getLogger(__name__)

SCRIPT = Path(patroni_before_stop.__file__)


def before_stop_command(cluster: Cluster) -> str:
    """Patroni's ``postgresql.before_stop`` of the cluster's members (Patroni splits it with shlex)."""
    return " ".join([sys.executable, "-I", str(SCRIPT), str(cluster.socket_dir)])


class Handover:
    """One switchover's side of the files in the cluster's socket directory."""

    def __init__(self, cluster: Cluster) -> None:
        self.pending = Path(cluster.socket_dir) / patroni_before_stop.PENDING
        self.stopping = Path(cluster.socket_dir) / patroni_before_stop.STOPPING

    def wait_stopping(self, done: Callable[[], bool], timeout: float) -> bool:
        """Until the old primary's Patroni is about to stop it (True), or ``done()`` says there is
        nothing to wait for (Patroni refused or answered) or ``timeout`` passed (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.stopping.exists():
                return True
            if done():
                return False
            time.sleep(0.01)
        return False

    def release(self) -> None:
        """The pools are paused: let the stop go on."""
        self.pending.unlink(missing_ok=True)


@contextmanager
def handover(cluster: Cluster) -> Iterator[Handover]:
    """The pending file for the block's length; nothing left behind afterwards."""
    hand = Handover(cluster)
    hand.stopping.unlink(missing_ok=True)
    hand.pending.write_text("switchover\n")
    try:
        yield hand
    finally:
        hand.pending.unlink(missing_ok=True)
        hand.stopping.unlink(missing_ok=True)
