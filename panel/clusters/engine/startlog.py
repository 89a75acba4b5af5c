"""Why a server's start failed, in the server's own words: what this start wrote to the cluster's
log (or, when it failed before its logging collector ran, to pg_ctl's), not what came before it."""

from __future__ import annotations

import os
import time
from pathlib import Path

# What a postmaster writes to pg_ctl's log once it hands its output to the logging collector (in
# English: initdb gives the servers the C.UTF-8 locale); from then on its reason goes to the
# cluster's log.
COLLECTOR_STARTED = "redirecting log output to logging collector process"
# How long the collector may take to write the reason after pg_ctl saw the postmaster go: it
# drains its pipe only then (a loaded full run read the log before it had).
COLLECTOR_DRAIN_SECONDS = 5.0


def sizes(*paths: Path) -> dict[Path, int]:
    """Each log's size now: where a start's own lines begin."""
    return {path: _size(path) for path in paths}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def tail(log_file: Path, lines: int = 3, *, since: int = 0) -> str:
    """The last lines of ``log_file`` written from byte ``since`` on (all of it once it shrank:
    a new file), the errors among them first."""
    text = _read(log_file, since).strip().splitlines()
    important = [line for line in text if "FATAL" in line or "ERROR" in line or "PANIC" in line]
    return " ".join((important or text)[-lines:])


def _read(log_file: Path, since: int) -> str:
    try:
        with open(log_file, "rb") as handle:
            handle.seek(since if since <= os.fstat(handle.fileno()).st_size else 0)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def start_reason(log_file: Path, startup_log: Path, since: dict[Path, int]) -> str:
    """The failed start's reason: the cluster's log where the logging collector ran (waiting for it
    to drain, up to COLLECTOR_DRAIN_SECONDS), else pg_ctl's log."""
    collector = COLLECTOR_STARTED in _read(startup_log, since.get(startup_log, 0))
    deadline = time.monotonic() + (COLLECTOR_DRAIN_SECONDS if collector else 0)
    while True:
        reason = tail(log_file, since=since.get(log_file, 0))
        if reason or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    return reason or tail(startup_log, since=since.get(startup_log, 0))
