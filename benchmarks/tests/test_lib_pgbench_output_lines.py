"""The pgbench output parser on single lines: progress lines of older and cut forms, the run's
progress shape, every kind of error line, and the run's status from its exit code."""

from __future__ import annotations

from benchmarks.lib.pgbench_output import (
    CLIENT_ABORTED,
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    FAILED,
    NO_CONNECTION,
    RUN_ABORTED,
    TX_FAILURE,
    ErrorLine,
    ProgressSample,
    ProgressShape,
    StderrParser,
    Summary,
    classify_exit,
    parse_error_line,
    parse_progress_line,
)


def test_older_progress_form_without_failures() -> None:
    line = "progress: 5.0 s, 2367.1 tps, lat 20.285 ms stddev 9.457"
    assert parse_progress_line(line) == ProgressSample(5.0, 2367.1, 20.285, 9.457, None)
    assert parse_progress_line(line + ", lag 0.500 ms, 3 skipped") == ProgressSample(
        5.0, 2367.1, 20.285, 9.457, None, lag_ms=0.5, skipped=3
    )
    assert parse_progress_line(line, ProgressShape()) is None  # a v15 run always prints "failed"


def test_a_line_cut_inside_its_last_number_is_refused() -> None:
    # Found by the fuzz test: "stddev 9.35" (cut from 9.359) must not pass for a complete line.
    assert parse_progress_line("progress: 20.0 s, 2121.1 tps, lat 22.510 ms stddev 9.35") is None
    assert parse_progress_line("progress: 20.0 s, 2121.1 tps, lat 22.510 ms stddev 9.359") is not None
    assert (
        parse_progress_line("progress: 1.0 s, 454.0 tps, lat 1.728 ms stddev 0.941, 0 failed, lag 0.08 ms")
        is None
    )


def test_shape_refuses_lines_cut_before_their_optional_parts() -> None:
    line = "progress: 1.0 s, 454.0 tps, lat 1.728 ms stddev 0.941, 0 failed, lag 0.085 ms, 0 skipped"
    shape = ProgressShape(lag=True, skipped=True)
    assert parse_progress_line(line, shape) is not None
    assert parse_progress_line(line.split(", lag")[0], shape) is None
    assert parse_progress_line(line.split(", 0 skipped")[0], shape) is None
    assert parse_progress_line(line.split(", lag")[0]) is not None  # no shape: cannot tell


def test_classify_exit_edge_cases() -> None:
    summary = Summary(clients=4, transactions_processed=10)
    assert classify_exit(0, None, []) == (FAILED, "pgbench exited without printing a summary")
    assert classify_exit(-9, None, []) == (FAILED, "pgbench was stopped by signal 9")
    assert classify_exit(3, None, []) == (FAILED, "pgbench exited with code 3")
    abort = ErrorLine(CLIENT_ABORTED, "boom", 1)
    assert classify_exit(2, None, [abort]) == (COMPLETED_WITH_ERRORS, "1 client aborted: boom (no summary)")
    assert classify_exit(2, summary, []) == (COMPLETED_WITH_ERRORS, "0 of 4 clients aborted")
    script_error = parse_error_line('pgbench: error: bad.sql:2: syntax error in command "set"')
    assert script_error == ErrorLine(
        "error",
        'bad.sql:2: syntax error in command "set"',
        raw='pgbench: error: bad.sql:2: syntax error in command "set"',
    )
    assert classify_exit(1, None, [script_error]) == (
        FAILED,
        'could not start: bad.sql:2: syntax error in command "set"',
    )


def test_error_line_variants() -> None:
    refused = parse_error_line(
        'pgbench: error: connection to server at "127.0.0.1", port 1 failed: Connection refused'
    )
    assert refused is not None and refused.kind == CONNECTION_FAILED
    assert refused.message == 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    setup = parse_error_line("pgbench: error: could not create connection for setup")
    assert setup is not None and (setup.kind, setup.client_id) == (NO_CONNECTION, None)
    meta = parse_error_line(
        "pgbench: error: client 3 aborted in command 4 (set) of script 0; evaluation of meta-command failed"
    )
    assert meta is not None and (meta.kind, meta.client_id, meta.message) == (
        CLIENT_ABORTED,
        3,
        "evaluation of meta-command failed",
    )
    verbose = parse_error_line(
        "pgbench: error: client 7 got an error in command 3 (SQL) of script 0; ERROR:  could not serialize access"
    )
    assert verbose is not None and (verbose.kind, verbose.client_id) == (TX_FAILURE, 7)
    assert parse_error_line('NOTICE:  table "pgbench_accounts" does not exist, skipping') is None
    assert parse_error_line("\tIs the server running on that host and accepting TCP/IP connections?") is None
    ended = parse_error_line("pgbench: error: Run was aborted; the above results are incomplete.")
    assert ended is not None and ended.kind == RUN_ABORTED


def test_progress_line_with_a_message_inside_is_dropped_but_the_message_kept() -> None:
    parser = StderrParser(ProgressShape())
    line = (
        "progress: 5.0 s, 1678.3 tps, lat 11.834 ms stddev 3.244, 0 failed"
        "pgbench: error: client 19 script 0 aborted in command 4 query 0: FATAL:  query_wait_timeout"
    )
    event = parser.feed(line)
    assert isinstance(event, ErrorLine) and event.client_id == 19
    assert parser.feed("") is None
    assert parser.aborted_clients == {19}
