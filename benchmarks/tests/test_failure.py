"""The plain-words reason of a failed run, from pgbench's real output (fixtures/pgbench, copied from
shared/reference/pgbench): each capture is parsed the way the executor parses a run, then explained."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.lib.pgbench_output import FATAL_KINDS, StderrParser, classify_exit, parse_summary
from benchmarks.services.failure import explain_failure, kind_label

REFERENCE = Path(__file__).parent / "fixtures" / "pgbench"
_TAGGED = re.compile(r"^\[\s*[\d.]+\] ([OE])\| ?(.*)$")
_EXIT = re.compile(r"exit_code=(\d+)")


def stored_fields(name: str) -> tuple[str, str, str]:
    """(status, reason, first_error) as the executor stores them for this recorded pgbench run."""
    text = (REFERENCE / name).read_text()
    parser = StderrParser()
    stdout: list[str] = []
    for line in text.splitlines():
        match = _TAGGED.match(line)
        if match is None:
            continue
        if match.group(1) == "O":
            stdout.append(match.group(2) + "\n")
        else:
            parser.feed(match.group(2))
    code = int(_EXIT.search(text).group(1))  # type: ignore[union-attr]
    summary = parse_summary("".join(stdout), run_aborted=parser.run_aborted)
    status, reason = classify_exit(code, summary, parser.errors)
    first = next((error.message for error in parser.errors if error.kind in FATAL_KINDS), "")
    return status, reason, first


def test_more_clients_than_the_plan_allows() -> None:
    status, reason, first = stored_fields("b_direct_c150.tagged.txt")
    assert status == "failed" and "remaining connection slots are reserved" in first
    explanation = explain_failure(status, reason, first)
    assert explanation is not None
    assert explanation.title == "More clients than the plan allows"
    assert "connection pool" in explanation.advice and "fewer clients" in explanation.advice
    assert "remaining connection slots are reserved" in explanation.detail  # pgbench's own words kept


def test_prepared_statements_through_a_transaction_pool() -> None:
    status, reason, first = stored_fields("fmt11_prepared_via_txpool.tagged.txt")
    explanation = explain_failure(status, reason, first)
    assert explanation is not None and explanation.title.startswith("Prepared statements")
    assert 'prepared statement "P_0"' in explanation.detail


def test_the_pool_timed_clients_out() -> None:
    status, reason, first = stored_fields("f2_sess20_c150_qwt5.tagged.txt")
    explanation = explain_failure(status, reason, first)
    assert explanation is not None and "pool" in explanation.title
    assert "query_wait_timeout" in explanation.detail


def test_a_clean_run_needs_no_explanation() -> None:
    status, reason, first = stored_fields("a_direct_c50.tagged.txt")
    assert status == "succeeded" and explain_failure(status, reason, first) is None
    assert explain_failure("running", "", "") is None and explain_failure("queued", "", "") is None


@pytest.mark.parametrize(
    ("first_error", "title"),
    [
        # libpq's messages, as pgbench prints them (seen in the integration tests).
        ('connection to server at "127.0.0.1", port 1 failed: Connection refused', "Could not connect"),
        (
            'connection to server on socket "/tmp/x/.s.PGSQL.5432" failed: No such file or directory',
            "Could not connect",
        ),
        (
            'connection to server at "127.0.0.1", port 26900 failed: FATAL:  database "nope" does not exist',
            "The database does not exist",
        ),
        ('relation "pgbench_branches" does not exist', "The database has no pgbench tables"),
        (
            'connection to server at "127.0.0.1", port 26900 failed: FATAL:  password authentication '
            'failed for user "app"',
            "The server did not accept the user or its password",
        ),
    ],
)
def test_libpq_messages(first_error: str, title: str) -> None:
    explanation = explain_failure("failed", f"could not start: {first_error}", first_error)
    assert explanation is not None and explanation.title.startswith(title)
    # pgbench's words, without the paths they name (issue 38): the socket's is "the server's socket".
    assert explanation.detail == first_error.replace('socket "/tmp/x/.s.PGSQL.5432"', "the server's socket")
    assert "/tmp/x" not in explanation.detail


def test_panel_reasons_cancel_worker_lost_and_errors() -> None:
    cancelled = explain_failure("cancelled", "", "")
    assert cancelled is not None and cancelled.title == "Cancelled by a user"
    lost = explain_failure("failed", "worker lost: the process running it stopped sending heartbeats", "")
    assert lost is not None and lost.title == "The worker running it stopped"
    errored = explain_failure("errored", "Traceback (most recent call last):\n  ...\nKeyError: 'x'", "")
    # The traceback (the panel's files, the server's paths) is the log's: nothing of it on the page.
    assert errored is not None and errored.detail == "" and "log" in errored.advice
    aborted = explain_failure(
        "completed_with_errors", "2 of 4 clients aborted: server closed the connection", ""
    )
    assert aborted is not None and aborted.title == "Some clients aborted"
    # The binary missing is the panel's problem, not a connection one.
    missing = explain_failure("failed", "Could not run /nonexistent/pgbench: No such file or directory.", "")
    assert missing is not None and missing.title == "The run did not finish"


def test_error_kinds_in_words() -> None:
    assert kind_label("connection_failed") == "connection failed"
    assert kind_label("client_aborted") == "client aborted"
    assert kind_label("something_new") == "something new"
