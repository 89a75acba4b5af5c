"""A member's Patroni, as ``patroni CONFIG`` runs it, with two waits of a switchover shortened:

    python -I patroni_run.py CONFIG

1. Patroni 4.1.5 looks once a second (``patroni.postgresql.STOP_POLLING_INTERVAL``) whether a
   PostgreSQL it stops has closed its connection and whether ``pg_controldata`` says "shut down".
   In a switchover those two looks come one after the other while every pool client waits: up to
   2 s of the interruption, for a shutdown that takes a few hundred milliseconds here. Polling
   every 100 ms costs a ``SELECT 1`` and a ``pg_controldata`` per look, only while a server stops.
2. Once the old primary is shut down, Patroni's demote sleeps a fixed second ("give replicas some
   more time to catch up", ``on_shutdown`` in ``patroni.ha``) before it asks the standbys whether
   one of them has the shutdown checkpoint, and only then releases the leader key. Here the
   synchronous standby has it at once: the sleep becomes a poll of that same question every 50 ms
   for at most the same second, so the key goes as soon as a standby can take it, and never
   sooner than Patroni itself would allow.

Imports nothing of the panel (it runs as the cluster's OS user).
"""

from __future__ import annotations

import sys
import time
from typing import Any

STOP_POLLING_INTERVAL = 0.1
CATCH_UP_POLL = 0.05


class DemoteClock:
    """``patroni.ha``'s ``time`` module, but for the one-second sleep in ``on_shutdown``: that one
    polls ``is_failover_possible`` (what Patroni asks right after the sleep) until it says yes."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        caller = sys._getframe(1)
        if seconds != 1 or caller.f_code.co_name != "on_shutdown":
            time.sleep(seconds)
            return
        ha = caller.f_locals.get("self")
        lsn = caller.f_locals.get("checkpoint_location")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if ha is not None and ha.is_failover_possible(cluster_lsn=lsn):
                    return
            except Exception:  # noqa: BLE001 - fall back to Patroni's own wait
                break
            time.sleep(CATCH_UP_POLL)
        time.sleep(max(0.0, deadline - time.monotonic()))


def main() -> None:
    import importlib

    import patroni.postgresql
    from patroni.__main__ import main as patroni_main

    ha = importlib.import_module("patroni.ha")  # after patroni.postgresql, or its imports circle

    # Both fail loudly if an upgrade of Patroni renamed them (test_lib_patroni).
    assert isinstance(patroni.postgresql.STOP_POLLING_INTERVAL, (int, float))
    assert ha.time is time
    patroni.postgresql.STOP_POLLING_INTERVAL = STOP_POLLING_INTERVAL
    ha.time = DemoteClock()  # type: ignore[attr-defined]  # patroni.ha's own `time`, replaced
    sys.argv[0] = "patroni"
    patroni_main()


if __name__ == "__main__":
    main()
