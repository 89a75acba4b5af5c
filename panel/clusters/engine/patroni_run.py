"""A member's Patroni, as ``patroni CONFIG`` runs it, with a finer stop poll:

    python -I patroni_run.py CONFIG

Patroni 4.1.5 looks once a second (``patroni.postgresql.STOP_POLLING_INTERVAL``) whether a
PostgreSQL it stops has closed its connection and whether ``pg_controldata`` says "shut down".
In a switchover those two looks come one after the other while every pool client waits: up to
2 s of the interruption, for a shutdown that takes a few hundred milliseconds here. Polling every
100 ms costs a ``SELECT 1`` and a ``pg_controldata`` per look, only while a server stops.
Imports nothing of the panel (it runs as the cluster's OS user).
"""

from __future__ import annotations

import sys

STOP_POLLING_INTERVAL = 0.1


def main() -> None:
    import patroni.postgresql
    from patroni.__main__ import main as patroni_main

    # Fails loudly if an upgrade of Patroni renamed it (test_patroni_run).
    assert isinstance(patroni.postgresql.STOP_POLLING_INTERVAL, (int, float))
    patroni.postgresql.STOP_POLLING_INTERVAL = STOP_POLLING_INTERVAL
    sys.argv[0] = "patroni"
    patroni_main()


if __name__ == "__main__":
    main()
