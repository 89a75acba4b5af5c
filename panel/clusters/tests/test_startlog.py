"""A failed start's reason is read from what the start wrote, once the logging collector wrote it."""

from __future__ import annotations

import threading
from pathlib import Path

from panel.clusters.engine import startlog

HANDED_OVER = (
    'LOG:  skipping missing configuration file "quota.conf"\n'
    "LOG:  redirecting log output to logging collector process\n"
    'HINT:  Future log output will appear in directory "log".\n'
)
REASON = "FATAL:  could not create any TCP/IP sockets"


def test_the_reason_the_collector_writes_after_pg_ctl_returned_is_waited_for(tmp_path: Path) -> None:
    """pg_ctl reports the postmaster gone before the logging collector has drained its pipe (a
    loaded full run read the log first and showed pg_ctl's three lines instead)."""
    log_file, startup_log = tmp_path / "postgresql.log", tmp_path / "startup.log"
    log_file.write_text("ERROR: [103]: unable to find a valid repository (the last run's)\n")
    since = startlog.sizes(log_file, startup_log)
    startup_log.write_text(HANDED_OVER)

    def collector_drains() -> None:
        with open(log_file, "a") as handle:
            handle.write(f"LOG:  could not bind IPv4 address\n{REASON}\n")

    late = threading.Timer(0.5, collector_drains)
    late.start()
    try:
        assert startlog.start_reason(log_file, startup_log, since) == REASON
    finally:
        late.join()


def test_a_start_that_failed_before_the_collector_ran_gives_pg_ctls_words_at_once(tmp_path: Path) -> None:
    log_file, startup_log = tmp_path / "postgresql.log", tmp_path / "startup.log"
    log_file.write_text("ERROR: [103]: unable to find a valid repository (the last run's)\n")
    since = startlog.sizes(log_file, startup_log)
    startup_log.write_text('FATAL:  configuration file "postgresql.conf" contains errors\n')
    assert startlog.start_reason(log_file, startup_log, since) == (
        'FATAL:  configuration file "postgresql.conf" contains errors'
    )
