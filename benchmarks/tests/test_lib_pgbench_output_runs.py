"""Golden-file tests of the pgbench output parser on every real captured run in fixtures/pgbench:
progress samples, summaries, error lines and the run's status, against the figures written down
for each capture."""

from __future__ import annotations

import pytest

from benchmarks.lib.pgbench_output import (
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    DETAIL,
    FAILED,
    IGNORED,
    NO_CONNECTION,
    SUCCEEDED,
    WARNING,
    Summary,
    classify_exit,
    parse_summary,
)
from benchmarks.tests.pgbench_captures import FIXTURES, RESERVED, RUNS, load, parse, sample_values

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


def test_every_fixture_is_covered() -> None:
    names = {path.name for path in FIXTURES.iterdir() if path.suffix == ".txt"}
    assert names == set(RUNS) | INIT_FILES | LOG_FILES


@pytest.mark.parametrize("name", sorted(RUNS))
def test_it_parses_each_real_run(name: str) -> None:
    expected = RUNS[name]
    parsed = parse(name)
    assert len(parsed.samples) == expected.samples
    if expected.first is not None:
        assert sample_values(parsed.samples[0]) == expected.first
        assert sample_values(parsed.samples[-1]) == expected.last
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
