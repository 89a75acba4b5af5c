"""What one collection of a cluster is made of: its target (read from the panel's database
beforehand), the snapshot it fills, and the deadline every read runs under (a watchdog shuts a
connection's socket down when it passes, since a hung server never enforces its own timeout)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import psycopg

from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.insights.lib.statements import Baseline, Collected
from panel.pools.face import console
from panel.pools.models import Pooler

log = logging.getLogger(__name__)


BUDGET_SECONDS = 5.0
STATEMENT_TIMEOUT_MS = 2000
SCAN_DATABASES = 8
# Leave this much of the budget for PgBouncer and psutil before opening per-database connections.
SCAN_RESERVE_SECONDS = 1.5


@dataclass(frozen=True)
class Target:
    """One cluster to collect, with what the collector needs from the panel's database."""

    cluster: Cluster
    pools: dict[str, int]  # pool name → size
    pooler: Pooler | None
    statements: Baseline | None = None  # None: statements are not collected this time
    # Who may stream from it: its standby members' names, and its read-only replicas' by the
    # application_name they stream under (a slot name) → the replica's name.
    members: frozenset[str] = frozenset()
    replicas: dict[str, str] = field(default_factory=dict)


@dataclass
class Snapshot:
    """Everything one collection read: gauges as they are, counters as raw totals."""

    at: dt.datetime
    gauges: list[tuple[str, str, float]] = field(default_factory=list)  # (metric, labels, value)
    counters: list[tuple[str, str, str, float]] = field(default_factory=list)  # (source, counter, labels, v)
    up: dict[str, bool] = field(default_factory=dict)  # source → answered
    errors: dict[str, str] = field(default_factory=dict)  # source → why not
    query_seconds: float = 0.0  # time spent waiting on PostgreSQL and PgBouncer
    started_at: float | None = None  # the postmaster's start time (epoch seconds)
    statements: Collected | None = None  # pg_stat_statements (the Queries tab)

    def gauge(self, metric: str, labels: str, value: float | None) -> None:
        if value is not None:
            self.gauges.append((metric, labels, float(value)))

    def counter(self, source: str, name: str, labels: str, value: float | None) -> None:
        if value is not None:
            self.counters.append((source, name, labels, float(value)))


class Deadline:
    """The monotonic time by which a cluster's collection must be over."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()


class CollectTimeout(Exception):
    pass


@contextmanager
def watchdog(conn: psycopg.Connection[Any], deadline: Deadline) -> Iterator[None]:
    """Shut the connection's socket down at the deadline so a blocked read returns an error."""
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        with suppress(OSError):
            # A dup of the descriptor: shutdown() acts on the shared socket, close() only on the dup.
            sock = socket.socket(fileno=os.dup(conn.fileno()))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    remaining = deadline.remaining()
    if remaining <= 0:
        raise CollectTimeout(f"no time left of the {BUDGET_SECONDS:g} s budget")
    timer = threading.Timer(remaining, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except (psycopg.Error, dbconn.DatabaseError, console.ConsoleError) as exc:
        if fired.is_set():
            raise CollectTimeout(f"no answer within {BUDGET_SECONDS:g} s") from None
        raise exc
    finally:
        timer.cancel()
    if fired.is_set():
        raise CollectTimeout(f"no answer within {BUDGET_SECONDS:g} s")
