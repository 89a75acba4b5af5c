"""Golden-file tests of the pgbench output parser: every real capture in fixtures/pgbench."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.lib.pgbench_output import (
    CLIENT_ABORTED,
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    DETAIL,
    FAILED,
    IGNORED,
    NO_CONNECTION,
    RUN_ABORTED,
    SUCCEEDED,
    TX_FAILURE,
    WARNING,
    ErrorLine,
    InitDone,
    InitPhase,
    InitProgress,
    ProgressSample,
    ProgressShape,
    StderrParser,
    Summary,
    classify_exit,
    parse_error_line,
    parse_progress_line,
    parse_stderr,
    parse_summary,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pgbench"
TAGGED_LINE = re.compile(r"\[\s*[\d.]+\] ([OE])\| ?(.*)")
RESERVED = "remaining connection slots are reserved for non-replication superuser connections"


@dataclass
class Capture:
    command: str
    stdout: list[str]
    stderr: list[str]
    exit_code: int


def load(name: str) -> Capture:
    lines = (FIXTURES / name).read_text().splitlines()
    stdout: list[str] = []
    stderr: list[str] = []
    exit_code = -1
    for line in lines:
        match = TAGGED_LINE.fullmatch(line)
        if match:
            (stdout if match.group(1) == "O" else stderr).append(match.group(2))
        elif found := re.search(r"exit_code=(\d+)", line):
            exit_code = int(found.group(1))
    return Capture(lines[0].removeprefix("$ "), stdout, stderr, exit_code)


def shape_for(command: str) -> ProgressShape:
    """What the run's command line says its progress lines carry."""
    rate = "--rate" in command or " -R " in command
    limit = "--latency-limit" in command or " -L " in command
    tries = re.search(r"--max-tries=(\d+)", command)
    return ProgressShape(lag=rate, skipped=rate and limit, retries=bool(tries and tries.group(1) != "1"))


@dataclass
class Parsed:
    samples: list[ProgressSample]
    errors: list[ErrorLine]
    parser: StderrParser
    summary: Summary | None
    status: tuple[str, str]


def parse(name: str, *, with_shape: bool = True) -> Parsed:
    capture = load(name)
    parser = StderrParser(shape_for(capture.command) if with_shape else None)
    events = [parser.feed(line) for line in capture.stderr]
    summary = parse_summary("\n".join(capture.stdout), run_aborted=parser.run_aborted)
    return Parsed(
        samples=[event for event in events if isinstance(event, ProgressSample)],
        errors=[event for event in events if isinstance(event, ErrorLine)],
        parser=parser,
        summary=summary,
        status=classify_exit(capture.exit_code, summary, parser.errors),
    )


@dataclass(frozen=True)
class Expected:
    samples: int
    first: tuple[float, float, float, float, int] | None  # elapsed, tps, lat, stddev, failed
    last: tuple[float, float, float, float, int] | None
    tps: float | None
    latency_avg_ms: float | None
    processed: int | None


RUNS = {
    "a_direct_c50.tagged.txt": Expected(
        30, (1.0, 1692.7, 20.273, 7.558, 0), (30.0, 2391.3, 19.678, 8.656, 0), 2343.643052, 20.435, 69970
    ),
    "b2_direct_c150_connect_per_tx.tagged.txt": Expected(
        20, (1.1, 33.6, 519.162, 285.793, 0), (20.0, 129.4, 690.610, 346.040, 0), 132.058020, 636.621, 2661
    ),
    "b_direct_c150.tagged.txt": Expected(0, None, None, None, None, None),
    "c_pool97_tx_c150.tagged.txt": Expected(
        30, (1.0, 693.6, 108.185, 23.442, 0), (30.0, 1552.2, 97.169, 14.279, 0), 1517.216810, 98.501, 44939
    ),
    "f2_sess20_c150_qwt5.tagged.txt": Expected(
        15, (1.0, 931.9, 10.993, 2.564, 0), (15.0, 2107.9, 9.431, 2.126, 0), 1882.703823, 10.538, 27366
    ),
    "fmt11_prepared_via_txpool.tagged.txt": Expected(
        5, (1.0, 2038.9, 0.968, 0.635, 0), (5.0, 1924.0, 1.039, 0.711, 0), 1983.302577, 1.008, 9895
    ),
    "fmt1_failures_maxtries1.tagged.txt": Expected(
        10, (1.0, 1338.4, 1.561, 0.663, 4048), (10.0, 1365.5, 1.605, 0.769, 4176), 1369.564881, 1.603, 13643
    ),
    "fmt2_failures_maxtries3_r.tagged.txt": Expected(
        10, (1.0, 1292.4, 2.897, 1.983, 1006), (10.0, 1395.9, 2.771, 1.844, 1128), 1394.914563, 2.749, 13900
    ),
    "fmt3_tpcb_r_aggregate_log.tagged.txt": Expected(
        15, (1.0, 2481.4, 3.698, 1.546, 0), (15.0, 2534.8, 3.886, 1.521, 0), 2573.808095, 3.823, 38545
    ),
    "fmt4_rate500_latlimit10.tagged.txt": Expected(
        15, (1.0, 454.0, 1.728, 0.941, 0), (15.0, 499.0, 1.328, 0.494, 0), 496.354340, 1.430, 7423
    ),
    "fmt6_rate500_only.tagged.txt": Expected(
        10, (1.0, 472.0, 1.198, 0.749, 0), (10.0, 478.9, 1.054, 0.600, 0), 498.047357, 1.057, 4962
    ),
    "fmt7_rate5000_latlimit5_skips.tagged.txt": Expected(
        10, (1.0, 2652.2, 7.759, 1.532, 0), (10.0, 2961.1, 7.473, 1.513, 0), 2634.298151, 7.940, 26315
    ),
    "g1_stmt20_tpcb_c10.tagged.txt": Expected(0, None, None, None, None, 0),
    "g3_stmt20_S_c10.tagged.txt": Expected(
        20, (1.0, 8765.9, 1.088, 0.745, 0), (20.0, 13502.8, 0.725, 0.328, 0), 11725.926432, 0.838, 234159
    ),
    "pause_zero_tps_intervals.tagged.txt": Expected(
        10, (1.0, 2039.9, 4.757, 1.625, 0), (10.0, 2152.4, 4.640, 1.616, 0), 1357.014276, 7.357, 13545
    ),
    "local_custom_no_tables_vacuum.tagged.txt": Expected(0, None, None, 12105.072025, 0.165, 100),
    "local_latlimit_only.tagged.txt": Expected(
        2, (1.0, 1607.8, 1.230, 0.910, 0), (2.0, 1546.0, 1.294, 1.444, 0), 1578.163340, 1.263, 3156
    ),
    "local_no_progress_T2.tagged.txt": Expected(0, None, None, 1700.693875, 2.352, 3402),
    "local_nonowner_vacuum_t20.tagged.txt": Expected(0, None, None, 1424.045, 1.404, 40),
    "local_progress_timestamp.tagged.txt": Expected(
        2,
        (1795355718.749, 37154.3, 0.051, 0.139, 0),
        (1795355719.751, 29290.9, 0.066, 0.327, 0),
        33386.881569,
        0.058,
        66485,
    ),
    "local_too_many_clients.tagged.txt": Expected(0, None, None, None, None, None),
    "local_txlog_rate_retries.tagged.txt": Expected(
        3, (1.0, 216.0, 5.094, 4.239, 0), (3.0, 196.0, 1.762, 2.283, 0), 200.322992, 2.954, 599
    ),
}
# The runs that did not simply succeed: their status and reason (the others: SUCCEEDED, "").
OUTCOMES = {
    "b2_direct_c150_connect_per_tx.tagged.txt": (
        COMPLETED_WITH_ERRORS,
        f"53 of 150 clients aborted: aborted while establishing connection: {RESERVED}",
    ),
    "b_direct_c150.tagged.txt": (FAILED, f"could not start: {RESERVED}"),
    "f2_sess20_c150_qwt5.tagged.txt": (
        COMPLETED_WITH_ERRORS,
        "130 of 150 clients aborted: query_wait_timeout",
    ),
    "fmt11_prepared_via_txpool.tagged.txt": (
        COMPLETED_WITH_ERRORS,
        '2 of 4 clients aborted: prepared statement "P_0" does not exist',
    ),
    "g1_stmt20_tpcb_c10.tagged.txt": (
        COMPLETED_WITH_ERRORS,
        "10 of 10 clients aborted: transaction blocks not allowed in statement pooling mode",
    ),
    "local_too_many_clients.tagged.txt": (FAILED, f"could not start: {RESERVED}"),
}
INIT_FILES = {
    "init_s20.stderr.txt",
    "init_s20_quiet.txt",
    "init_steps_dtgvp.txt",
    "local_init_s3.tagged.txt",
}
LOG_FILES = {
    "pgbench_log_agg.20292.txt",
    "pgbench_log_aggfail.20625.txt",
    "pgbench_log_txlog.20682.txt",
    "local_txlog_rate_retries.14066.txt",
    "local_txlog_rate_retries.14066.1.txt",
}


def _values(sample: ProgressSample) -> tuple[float, float, float, float, int | None]:
    return (sample.elapsed_s, sample.tps, sample.latency_avg_ms, sample.latency_stddev_ms, sample.failed)


def test_every_fixture_is_covered() -> None:
    names = {path.name for path in FIXTURES.iterdir() if path.suffix == ".txt"}
    assert names == set(RUNS) | INIT_FILES | LOG_FILES


@pytest.mark.parametrize("name", sorted(RUNS))
def test_it_parses_each_real_run(name: str) -> None:
    expected = RUNS[name]
    parsed = parse(name)
    assert len(parsed.samples) == expected.samples
    if expected.first is not None:
        assert _values(parsed.samples[0]) == expected.first
        assert _values(parsed.samples[-1]) == expected.last
    if expected.processed is None:
        assert parsed.summary is None
    else:
        assert parsed.summary is not None
        assert parsed.summary.tps == expected.tps
        assert parsed.summary.latency_avg_ms == expected.latency_avg_ms
        assert parsed.summary.transactions_processed == expected.processed
    assert parsed.status == OUTCOMES.get(name, (SUCCEEDED, ""))


@pytest.mark.parametrize("name", sorted(RUNS))
def test_samples_are_the_same_without_a_shape(name: str) -> None:
    assert parse(name, with_shape=False).samples == parse(name).samples


def test_it_reads_every_field_of_a_plain_summary() -> None:
    summary = parse("a_direct_c50.tagged.txt").summary
    assert summary == Summary(
        pgbench_version="15.18 (Debian 15.18-0+deb12u1)",
        transaction_type="<builtin: TPC-B (sort of)>",
        scaling_factor=150,
        query_mode="simple",
        clients=50,
        threads=2,
        max_tries=1,
        duration_s=30,
        transactions_processed=69970,
        failed_transactions=0,
        failed_percent=0.0,
        latency_avg_ms=20.435,
        latency_stddev_ms=9.028,
        initial_connection_time_ms=274.739,
        tps=2343.643052,
    )


def test_it_reports_the_reserved_slots_refusal_of_b_direct_c150() -> None:
    parsed = parse("b_direct_c150.tagged.txt")
    assert parsed.samples == []
    assert parsed.summary is None
    assert [(error.kind, error.client_id) for error in parsed.errors] == [
        (CONNECTION_FAILED, None),
        (NO_CONNECTION, 122),
        (CONNECTION_FAILED, None),
        (NO_CONNECTION, 50),
    ]
    assert parsed.errors[0].message == RESERVED
    assert parsed.errors[1].message == "could not create connection for client 122"
    assert parsed.status == (FAILED, f"could not start: {RESERVED}")


def test_zero_transactions_give_nan_percent_and_an_aborted_summary() -> None:
    parsed = parse("g1_stmt20_tpcb_c10.tagged.txt")
    summary = parsed.summary
    assert summary is not None
    assert summary.transactions_processed == 0
    assert summary.failed_transactions == 0
    assert summary.failed_percent is None  # "0 (NaN%)"
    assert summary.latency_avg_ms is None and summary.tps is None
    assert summary.aborted
    assert parsed.parser.aborted_clients == set(range(10))


def test_aborted_flag_comes_from_stderr_or_merged_text() -> None:
    capture = load("fmt11_prepared_via_txpool.tagged.txt")
    stdout = "\n".join(capture.stdout)
    summary = parse_summary(stdout)
    assert summary is not None and not summary.aborted
    assert parse_summary(stdout, run_aborted=True).aborted  # type: ignore[union-attr]
    merged = stdout + "\npgbench: error: Run was aborted; the above results are incomplete.\n"
    assert parse_summary(merged).aborted  # type: ignore[union-attr]


def test_connect_per_transaction_summary_and_refusals() -> None:
    parsed = parse("b2_direct_c150_connect_per_tx.tagged.txt")
    summary = parsed.summary
    assert summary is not None
    assert summary.average_connection_time_ms == 13.107
    assert summary.initial_connection_time_ms is None
    assert summary.tps_includes_connections
    assert summary.aborted
    refused = [error for error in parsed.errors if error.kind == CONNECTION_FAILED]
    assert len(refused) == 53 and {error.message for error in refused} == {RESERVED}
    assert len(parsed.parser.aborted_clients) == 53
    assert parsed.parser.run_aborted


def test_failures_and_detailed_failures() -> None:
    summary = parse("fmt1_failures_maxtries1.tagged.txt").summary
    assert summary is not None
    assert summary.transaction_type == "/srv/panel-data/rr.sql"
    assert (summary.failed_transactions, summary.failed_percent) == (41787, 75.387)
    assert (summary.serialization_failures, summary.deadlock_failures) == (41787, 0)
    assert summary.retried_transactions is None


def test_retries_and_per_statement_report() -> None:
    parsed = parse("fmt2_failures_maxtries3_r.tagged.txt")
    assert (parsed.samples[0].retried, parsed.samples[0].retries) == (1638, 2942)
    assert parsed.samples[0].lag_ms is None
    summary = parsed.summary
    assert summary is not None
    assert summary.max_tries == 3
    assert (summary.retried_transactions, summary.retried_percent, summary.total_retries) == (
        18059,
        72.066,
        32158,
    )
    assert len(summary.statement_latencies) == 5
    update = summary.statement_latencies[3]
    assert (update.latency_ms, update.failures, update.retries) == (0.375, 11159, 32163)
    assert update.command == "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = :bid;"
    assert summary.statement_latencies[0].command == r"\set bid random(1, 2)"


def test_per_statement_report_without_retries() -> None:
    summary = parse("fmt3_tpcb_r_aggregate_log.tagged.txt").summary
    assert summary is not None
    assert len(summary.statement_latencies) == 11
    assert summary.statement_latencies[0].command == r"\set aid random(1, 100000 * :scale)"
    assert summary.statement_latencies[-1] == type(summary.statement_latencies[-1])(1.139, 0, None, "END;")


def test_rate_lag_and_skipped() -> None:
    rate_only = parse("fmt6_rate500_only.tagged.txt")
    assert rate_only.samples[0].lag_ms == 0.090 and rate_only.samples[0].skipped is None
    assert rate_only.summary is not None
    assert (rate_only.summary.schedule_lag_avg_ms, rate_only.summary.schedule_lag_max_ms) == (0.073, 3.339)
    assert rate_only.summary.skipped_transactions is None

    skips = parse("fmt7_rate5000_latlimit5_skips.tagged.txt")
    assert (skips.samples[0].lag_ms, skips.samples[0].skipped) == (4.236, 2054)
    assert sum(sample.skipped or 0 for sample in skips.samples) == 23202
    summary = skips.summary
    assert summary is not None
    assert (summary.skipped_transactions, summary.skipped_percent) == (23202, 46.857)
    assert (summary.latency_limit_ms, summary.late_transactions, summary.late_percent) == (5.0, 25750, 97.853)

    limited = parse("fmt4_rate500_latlimit10.tagged.txt")
    assert all(sample.skipped == 0 for sample in limited.samples)
    assert limited.summary is not None and limited.summary.late_transactions == 0


def test_latency_limit_without_rate_has_no_lag() -> None:
    parsed = parse("local_latlimit_only.tagged.txt")
    assert all(sample.lag_ms is None and sample.skipped is None for sample in parsed.samples)
    assert parsed.summary is not None
    assert (parsed.summary.late_transactions, parsed.summary.late_percent) == (1210, 38.340)


def test_zero_tps_intervals_are_real_samples() -> None:
    samples = parse("pause_zero_tps_intervals.tagged.txt").samples
    assert [sample.tps for sample in samples[3:6]] == [0.0, 0.0, 0.0]
    assert samples[6].latency_stddev_ms == 358.953


def test_transactions_mode_and_no_progress_summaries() -> None:
    summary = parse("local_custom_no_tables_vacuum.tagged.txt").summary
    assert summary is not None
    assert summary.duration_s is None
    assert (
        summary.transactions_per_client,
        summary.transactions_processed,
        summary.transactions_expected,
    ) == (
        50,
        100,
        100,
    )
    assert summary.latency_stddev_ms is None  # no -P, --rate or --latency-limit
    assert summary.pgbench_version == "15.20 (Debian 15.20-0+deb12u1)"
    plain = parse("local_no_progress_T2.tagged.txt").summary
    assert plain is not None and plain.latency_stddev_ms is None and plain.duration_s == 2


def test_vacuum_errors_pgbench_ignores_do_not_fail_the_run() -> None:
    parsed = parse("local_custom_no_tables_vacuum.tagged.txt")
    assert [error.kind for error in parsed.errors] == [IGNORED, DETAIL] * 3
    assert parsed.errors[0].message == 'relation "pgbench_branches" does not exist'
    assert classify_exit(1, None, parsed.errors) == (FAILED, "could not start: pgbench exited with code 1")
    nonowner = parse("local_nonowner_vacuum_t20.tagged.txt")
    assert [error.kind for error in nonowner.errors] == [WARNING, WARNING]
    assert nonowner.errors[0].message.startswith('skipping "pgbench_branches"')


def test_prepared_statements_through_a_transaction_pool() -> None:
    parsed = parse("fmt11_prepared_via_txpool.tagged.txt")
    assert parsed.parser.aborted_clients == {0, 2}
    assert parsed.summary is not None and parsed.summary.query_mode == "prepared"


def test_garbled_error_lines_of_f2_still_name_their_clients() -> None:
    parsed = parse("f2_sess20_c150_qwt5.tagged.txt")
    assert parsed.parser.aborted_clients == set(range(19, 75)) | set(range(76, 150))
    garbled = [error for error in parsed.errors if not error.raw.startswith("pgbench: error: client")]
    assert [(error.client_id, error.message) for error in garbled] == [
        (20, "query_wait_timeout"),
        (141, "query_wait_timeout"),
        (22, "query_wait_timeout"),
        (146, "query_wait_timeout"),
        (None, "Run was aborted; the above results are incomplete."),
    ]


def test_init_progress_phases_and_done() -> None:
    events = parse_stderr((FIXTURES / "init_s20.stderr.txt").read_text())
    progress = [event for event in events if isinstance(event, InitProgress)]
    assert len(progress) == 20
    assert progress[0] == InitProgress(100000, 2000000, 5, 0.03, 0.57)
    assert progress[-1] == InitProgress(2000000, 2000000, 100, 2.23, 0.0)
    phases = [event.step for event in events if isinstance(event, InitPhase)]
    assert phases == ["drop_tables", "create_tables", "generate_client", "vacuum", "primary_keys"]
    done = [event for event in events if isinstance(event, InitDone)]
    assert done == [
        InitDone(
            3.87,
            {
                "drop tables": 0.0,
                "create tables": 0.0,
                "client-side generate": 2.56,
                "vacuum": 0.27,
                "primary keys": 1.03,
            },
        )
    ]
    assert not [event for event in events if isinstance(event, ErrorLine | ProgressSample)]


def test_init_quiet_and_steps_variants() -> None:
    quiet = parse_stderr((FIXTURES / "init_s20_quiet.txt").read_text())
    assert [event for event in quiet if isinstance(event, InitProgress)] == [
        InitProgress(2000000, 2000000, 100, 2.31, 0.0)
    ]
    steps = parse_stderr((FIXTURES / "init_steps_dtgvp.txt").read_text())
    assert len([event for event in steps if isinstance(event, InitProgress)]) == 20
    local = load("local_init_s3.tagged.txt")
    events = parse_stderr("\n".join(local.stderr))
    assert [event.percent for event in events if isinstance(event, InitProgress)] == [33, 66, 100]
    assert parse_summary("\n".join(local.stdout)) is None


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


def test_carriage_return_progress_keeps_the_last_state() -> None:
    parser = StderrParser()
    line = (
        "100000 of 300000 tuples (33%) done (elapsed 0.08 s, remaining 0.16 s)\r"
        "200000 of 300000 tuples (66%) done (elapsed 0.17 s, remaining 0.08 s)\r"
    )
    assert parser.feed(line) == InitProgress(200000, 300000, 66, 0.17, 0.08)


# --- fuzzing: garbled streams never crash and never invent a sample --------------------------------

# What other threads write into stderr while thread 0 prints progress: pg_log's separate writes
# ("pgbench:", " ", "error: ") and whole message bodies ending with a newline.
FOREIGN_WRITES = ["pgbench:", " ", "error: ", "pgbench: ", "detail: ", "\n"] + [
    line + "\n"
    for name in (
        "f2_sess20_c150_qwt5.tagged.txt",
        "b2_direct_c150_connect_per_tx.tagged.txt",
        "g1_stmt20_tpcb_c10.tagged.txt",
    )
    for line in load(name).stderr
    if not line.startswith("progress: ")
][:40]


def _same_core(sample: ProgressSample, intact: ProgressSample) -> bool:
    """Same measured values; optional parts may be missing (line cut at a part boundary)."""
    if _values(sample)[:4] != _values(intact)[:4]:
        return False
    optional = ("failed", "lag_ms", "skipped", "retried", "retries")
    return all(getattr(sample, name) in (None, getattr(intact, name)) for name in optional)


def _garble(rng: random.Random, stream: str) -> str:
    """Insert other threads' writes at random byte positions, then maybe cut the tail off."""
    positions = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randint(1, 12)))
    pieces: list[str] = []
    previous = 0
    for position in positions:
        pieces.append(stream[previous:position])
        write = rng.choice(FOREIGN_WRITES)
        if rng.random() < 0.3:  # a message body can itself arrive cut by the capture
            write = write[: rng.randrange(len(write) + 1)]
        pieces.append(write)
        previous = position
    pieces.append(stream[previous:])
    garbled = "".join(pieces)
    if rng.random() < 0.3:  # pgbench killed mid-line
        garbled = garbled[: rng.randrange(len(garbled) + 1)]
    if rng.random() < 0.3:  # a lost newline joins two lines
        newlines = [index for index, char in enumerate(garbled) if char == "\n"]
        if newlines:
            index = rng.choice(newlines)
            garbled = garbled[:index] + garbled[index + 1 :]
    return garbled


@pytest.mark.parametrize("name", sorted(name for name, expected in RUNS.items() if expected.samples))
def test_fuzzed_garbling_never_yields_a_sample_from_a_broken_line(name: str) -> None:
    capture = load(name)
    shape = shape_for(capture.command)
    progress_lines = [line for line in capture.stderr if line.startswith("progress: ")]
    intact = {parse_progress_line(line, shape) for line in progress_lines}
    stream = "".join(line + "\n" for line in capture.stderr)
    rng = random.Random(f"pgbench-fuzz-{name}")
    produced = 0
    for _ in range(150):
        for use_shape in (True, False):
            parser = StderrParser(shape if use_shape else None)
            for line in _garble(rng, stream).split("\n"):
                event = parser.feed(line)
                if isinstance(event, ProgressSample):
                    produced += 1
                    if use_shape:
                        assert event in intact, line
                    else:  # without the shape, a line cut before ", lag" still has true core values
                        assert any(_same_core(event, sample) for sample in intact if sample), line
    assert produced > 0  # the intact lines between the garbled ones still count


def test_fuzzed_cuts_and_concatenations_of_real_lines_never_raise() -> None:
    rng = random.Random(15)
    lines = [line for name in sorted(RUNS) for line in load(name).stderr + load(name).stdout]
    lines += (FIXTURES / "init_s20.stderr.txt").read_text().splitlines()
    alphabet = "progress: 0123456789.,s tpslatmsfailedlagskippedretried\r\t()%/:-"
    for _ in range(3000):
        first, second = rng.choice(lines), rng.choice(lines)
        candidates = [
            first[: rng.randrange(len(first) + 1)] + second[rng.randrange(len(second) + 1) :],
            first + second,
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(80))),
        ]
        parser = StderrParser(ProgressShape())
        for candidate in candidates:
            parser.feed(candidate)
            parse_error_line(candidate)
            parse_summary(candidate)
