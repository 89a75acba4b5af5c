"""The writers of a machine-loss trial (tests/machine_loss.py): one that commits sequential ids in
a thread of its own and gives up on a statement unanswered for ``STALL`` seconds (a frozen
server's kernel still acknowledges TCP, so nothing else would end the wait: its socket is shut),
and the isolated client's script, run inside the lost node's namespace."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

PACE = 0.01  # between a writer's commits: three writers leave the 2-core machine some room
STALL = 3.0
CONNECT_TIMEOUT = 2
# The isolated client: straight to the old primary's member port, every acknowledged commit
# logged with its monotonic time, every error too; reconnects and tries again until killed.
ISOLATED = """
import sys, time, psycopg
dsn, log, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = open(log, "a", buffering=1)
conn = None
while True:
    n += 1
    try:
        if conn is None:
            conn = psycopg.connect(dsn, autocommit=True, connect_timeout=2)
        conn.execute("INSERT INTO acked VALUES (%s, 'isolated')", [n])
        out.write(f"ack {n} {time.monotonic()}\\n")
    except psycopg.Error as exc:
        out.write(f"error {n} {time.monotonic()} {str(exc).strip().splitlines()[:1]}\\n")
        conn = None
        time.sleep(0.2)
    time.sleep(0.02)
"""


@dataclass
class Writer:
    """Commits ids from ``first`` + 1, one per transaction, through ``uri``; what was
    acknowledged and what failed (outcome unknown), each with its monotonic time."""

    name: str
    uri: str
    first: int
    acked: list[tuple[int, float]] = field(default_factory=list)
    unknown: list[tuple[int, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    busy: tuple[psycopg.Connection, float] | None = None

    def run(self) -> None:
        conn: psycopg.Connection | None = None
        n = self.first
        while not self.stop.is_set():
            n += 1
            try:
                if conn is None:
                    conn = psycopg.connect(self.uri, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
                self.busy = (conn, time.monotonic())
                conn.execute("INSERT INTO acked VALUES (%s, %s)", [n, self.name])
                self.busy = None
                self.acked.append((n, time.monotonic()))
            except psycopg.Error:
                self.busy = None
                self.unknown.append((n, time.monotonic()))
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
            time.sleep(PACE)
        if conn is not None:
            conn.close()

    def watch(self) -> None:
        """A statement unanswered for ``STALL`` s has its socket shut: the writer sees an error."""
        while not self.stop.is_set():
            busy = self.busy
            if busy is not None and time.monotonic() - busy[1] > STALL:
                with contextlib.suppress(OSError, psycopg.Error):
                    sock = socket.socket(fileno=os.dup(busy[0].pgconn.socket))
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
            time.sleep(0.1)

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self.run, daemon=True),
            threading.Thread(target=self.watch, daemon=True),
        ]
        for thread in threads:
            thread.start()
        return threads

    def first_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the first commit acknowledged after this writer's first
        failure since (commits under way when the node was lost may still be acknowledged
        while it is being frozen: those are not the new primary's)."""
        failed = next((t for _n, t in self.unknown if t > moment), None)
        if failed is None:
            return None
        return next((t - moment for _n, t in self.acked if t > failed), None)


def isolated_acks(log: Path) -> list[float]:
    return [float(line.split()[2]) for line in log.read_text().splitlines() if line.startswith("ack ")]
