"""Golden-file tests of the sysbench parser and command builder: real captures in fixtures/sysbench."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb
from benchmarks.lib.pgbench_output import (
    CLIENT_ABORTED,
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    DETAIL,
    FAILED,
    RUN_ABORTED,
    SCRIPT_ERROR,
    SUCCEEDED,
    ErrorLine,
    ProgressSample,
)
from benchmarks.lib.sysbench_output import (
    SysbenchParser,
    classify_exit,
    histogram_percentile,
    parse_init_line,
    parse_interval_line,
    parse_report,
)

FIXTURES = Path(__file__).parent / "fixtures" / "sysbench"
TARGET = cmd.ConnectionTarget("127.0.0.1", 26154, "doadmin", "txpool")


def feed(name: str) -> tuple[SysbenchParser, list[ProgressSample], list[ErrorLine]]:
    parser = SysbenchParser()
    samples, errors = [], []
    for line in (FIXTURES / f"{name}.txt").read_text().splitlines(keepends=True):
        event = parser.feed(line)
        if isinstance(event, ProgressSample):
            samples.append(event)
        elif isinstance(event, ErrorLine):
            errors.append(event)
    return parser, samples, errors


def test_it_reads_every_interval_line_of_a_run() -> None:
    parser, samples, errors = feed("rw_direct_c4_t5")
    assert [s.elapsed_s for s in samples] == [1, 2, 3, 4, 5]
    assert [s.tps for s in samples] == [299.65, 266.01, 250.07, 365.99, 335.99]
    # err/s are deadlocks sysbench ignored and retried: the sample's retried transactions.
    assert [s.retried for s in samples] == [3, 2, 0, 2, 2]
    assert all(s.latency_avg_ms is None and s.failed is None for s in samples)
    assert parser.last_figures is not None and parser.last_figures.latency_pct_ms == 23.95
    assert parser.last_figures.threads == 4 and parser.last_figures.qps == 6775.88
    assert (parser.last_figures.reads_per_s, parser.last_figures.writes_per_s) == (4744.91, 1352.98)
    assert errors == [] and not parser.run_aborted


def test_it_reads_the_final_report() -> None:
    parser, _samples, _errors = feed("rw_direct_c4_t5")
    report = parse_report(parser.report_text)
    assert report is not None
    assert (report.reads, report.writes, report.others, report.queries) == (21434, 6099, 3069, 30602)
    assert (report.transactions, report.tps, report.qps) == (1522, 299.96, 6031.12)
    assert (report.ignored_errors, report.reconnects, report.events) == (9, 0, 1522)
    assert report.total_time_s == 5.0736
    assert (report.latency_min_ms, report.latency_avg_ms, report.latency_max_ms) == (1.94, 13.20, 188.95)
    assert (report.latency_percentile, report.latency_percentile_ms) == (95, 29.72)
    assert report.latency_p95_ms == 29.72 and report.latency_p50_ms is None  # no histogram
    summary = report.as_summary()
    assert summary["tps"] == 299.96 and summary["transactions_processed"] == 1522
    assert summary["duration_s"] == 5 and summary["failed_transactions"] == 0


def test_the_whole_report_also_reads_from_the_file_at_once() -> None:
    # The threads count is in the banner, before the report: parse_report of the whole stdout.
    report = parse_report((FIXTURES / "rw_direct_c4_t5.txt").read_text())
    assert report is not None and report.threads == 4 and report.tps == 299.96


def test_it_reads_the_runs_percentiles_off_the_histogram() -> None:
    text = (FIXTURES / "rw_direct_c4_hist.txt").read_text()
    report = parse_report(text)
    assert report is not None
    # Every event is in the histogram, and sysbench's own p95 is the histogram's.
    assert report.histogram_count == report.events == 743
    assert report.latency_p95_ms == pytest.approx(report.latency_percentile_ms, rel=0.03)
    assert report.latency_p50_ms is not None and report.latency_p99_ms is not None
    assert report.latency_min_ms <= report.latency_p50_ms < report.latency_p95_ms  # type: ignore[operator]
    assert report.latency_p95_ms < report.latency_p99_ms <= report.latency_max_ms  # type: ignore[operator]
    parser, samples, _errors = feed("rw_direct_c4_hist")
    # Streamed line by line, the same report as from the whole text, the threads from the banner.
    assert len(samples) == 5 and parse_report(parser.report_text) == report and report.threads == 4


def test_histogram_percentile_counts_up_to_the_wanted_share() -> None:
    rows = [(1.0, 50), (2.0, 45), (3.0, 4), (9.0, 1)]
    assert histogram_percentile(rows, 50) == 1.0
    assert histogram_percentile(rows, 95) == 2.0
    assert histogram_percentile(rows, 99) == 3.0
    assert histogram_percentile(rows, 100) == 9.0
    assert histogram_percentile([], 50) is None


@pytest.mark.parametrize(
    "name", ["ro_pool_c4_ps_disable", "rw_pool_c4_ps_disable", "ps_direct_c2", "wo_direct_c2"]
)
def test_every_script_and_the_pool_give_samples_and_a_report(name: str) -> None:
    parser, samples, errors = feed(name)
    report = parse_report(parser.report_text)
    assert samples and errors == [] and report is not None and report.tps
    # The per-second figures add up to the report's transactions.
    assert sum(s.tps for s in samples) == pytest.approx(report.transactions, rel=0.1)


@pytest.mark.parametrize(
    ("name", "code", "status", "reason"),
    [
        ("rw_direct_c4_t5", 0, SUCCEEDED, ""),
        (
            "fail_wrong_password",
            1,
            FAILED,
            'could not start: password authentication failed for user "doadmin"',
        ),
        ("ro_pool_c4_ps_default", 1, FAILED, "could not start: prepared statement"),
        (
            "fail_missing_table",
            -11,
            FAILED,
            'sysbench was stopped by signal 11 after: relation "sbtest3" does not exist',
        ),
    ],
)
def test_the_exit_and_the_output_decide_the_status(name: str, code: int, status: str, reason: str) -> None:
    parser, _samples, errors = feed(name)
    found = classify_exit(code, parse_report(parser.report_text), errors, samples=parser.samples)
    assert found[0] == status and found[1].startswith(reason)


def test_a_report_after_an_error_exit_completed_with_errors() -> None:
    parser, _samples, _errors = feed("rw_direct_c4_t5")
    aborted = ErrorLine(CLIENT_ABORTED, "SQL error, errno = 0")
    assert classify_exit(1, parse_report(parser.report_text), [aborted], samples=5) == (
        COMPLETED_WITH_ERRORS,
        "clients aborted: SQL error, errno = 0",
    )
    assert classify_exit(0, None, [])[0] == FAILED


def test_a_run_by_transactions_has_a_report_and_no_interval() -> None:
    parser, samples, _errors = feed("rw_direct_events200")
    report = parse_report(parser.report_text)
    assert samples == [] and report is not None and report.transactions == 200


def test_prepared_statements_through_a_transaction_pool_abort_the_clients() -> None:
    parser, samples, errors = feed("ro_pool_c4_ps_default")
    assert samples == [] and parse_report(parser.report_text) is None
    kinds = [e.kind for e in errors]
    assert kinds.count(CLIENT_ABORTED) == 4 and kinds.count(SCRIPT_ERROR) == 4
    aborted = next(e for e in errors if e.kind == CLIENT_ABORTED)
    assert aborted.message.startswith("SQL error, errno = 0, state = '26000': prepared statement \"sbstmt")
    first = next(e for e in errors if e.kind == SCRIPT_ERROR)
    assert first.message.startswith('prepared statement "sbstmt') and first.message.endswith("does not exist")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("fail_wrong_password", 'password authentication failed for user "doadmin"'),
        (
            "fail_nossl",
            'pg_hba.conf rejects connection for host "127.0.0.1", user "doadmin", database "defaultdb", '
            "no encryption",
        ),
    ],
)
def test_a_refused_connection_is_the_first_error(name: str, message: str) -> None:
    parser, samples, errors = feed(name)
    assert samples == [] and parser.run_aborted
    assert errors[0] == ErrorLine(CONNECTION_FAILED, message, raw=errors[0].raw)
    # "thread_init failed" follows each refusal: context, not a second error.
    assert [e.kind for e in errors] == [CONNECTION_FAILED, DETAIL, CONNECTION_FAILED, DETAIL, RUN_ABORTED]


def test_too_many_clients_names_the_servers_refusal() -> None:
    _parser, _samples, errors = feed("fail_too_many_clients")
    refused = {e.message for e in errors if e.kind == CONNECTION_FAILED}
    assert refused == {
        "remaining connection slots are reserved for non-replication superuser connections",
        "sorry, too many clients already",
    }


def test_a_missing_table_is_a_script_error_and_its_context_lines_are_dropped() -> None:
    _parser, samples, errors = feed("fail_missing_table")
    assert samples == [] and len(errors) == 10
    assert {e.message for e in errors} == {'relation "sbtest3" does not exist'}


def test_prepare_lines_name_the_table_and_when_its_rows_are_in() -> None:
    lines = (FIXTURES / "prepare_t4_s200000_threads2.txt").read_text().splitlines()
    steps = [step for step in map(parse_init_line, lines) if step is not None]
    assert len(steps) == 12
    assert sorted(step.table for step in steps if step.rows_done) == [1, 2, 3, 4]
    assert steps[1].message == "Inserting 200000 records into 'sbtest1'" and not steps[1].rows_done
    assert parse_interval_line("Creating table 'sbtest1'...") is None


def test_the_run_command_holds_no_password_and_disables_prepared_statements_through_a_pool() -> None:
    options = engines.make_options(
        clients=4, duration_s=30, builtin="oltp_read_only", engine="sysbench", tables=4, table_size=100_000
    )
    options = type(options)(**{**options.__dict__, "query_mode": sb.ps_mode_for("transaction")})
    assert engines.problems(options) == []
    args = sb.build_run_args("/usr/bin/sysbench", TARGET, options)
    assert args == [
        "/usr/bin/sysbench", "oltp_read_only", "--db-driver=pgsql", "--pgsql-host=127.0.0.1",
        "--pgsql-port=26154", "--pgsql-user=doadmin", "--pgsql-db=txpool", "--tables=4",
        "--table-size=100000", "--threads=4", "--time=30", "--report-interval=1", "--percentile=95",
        "--histogram=on", "--db-ps-mode=disable", "run",
    ]  # fmt: skip
    assert not any("password" in arg for arg in args)
    assert sb.ps_mode_for(None) == "auto" and sb.ps_mode_for("session") == "auto"


def test_transactions_per_client_become_events_in_total() -> None:
    options = engines.make_options(
        clients=3, transactions=100, builtin="oltp_point_select", engine="sysbench", tables=1, table_size=10
    )
    args = sb.build_run_args("sysbench", TARGET, options)
    assert "--events=300" in args and "--time=0" in args and options.threads == 3


@pytest.mark.parametrize("script", ["/tmp/mine.lua", "../oltp_read_write", "tpcb-like", None])
def test_only_a_builtin_oltp_script_reaches_the_command_line(script: str | None) -> None:
    """sysbench loads any Lua file its first argument names: a tenant must not choose one."""
    options = engines.make_options(
        clients=1, duration_s=1, builtin=script, engine="sysbench", tables=1, table_size=10, query_mode="auto"
    )
    assert [field for field, _m in engines.problems(options)] == ["script"]
    with pytest.raises(ValueError, match="not a built-in sysbench script"):
        sb.build_run_args("sysbench", TARGET, options)


def test_prepare_and_cleanup_commands() -> None:
    assert sb.build_prepare_args("sysbench", TARGET, 2, 10_000)[-3:] == [
        "--tables=2",
        "--table-size=10000",
        "prepare",
    ]
    assert sb.build_prepare_args("sysbench", TARGET, 2, 10_000, "cleanup")[-2:] == ["--tables=2", "cleanup"]
    odd = cmd.ConnectionTarget("h", 1, "u", "a=b")
    assert "--pgsql-db=dbname='a=b'" in sb.build_prepare_args("sysbench", odd, 1, 1)


def test_it_refuses_pgbench_only_options_naming_their_fields() -> None:
    options = cmd.RunOptions(
        clients=2,
        threads=2,
        duration_s=10,
        builtin="tpcb-like",
        latency_limit_ms=5,
        connect_per_transaction=True,
        max_tries=3,
        engine="sysbench",
        query_mode="auto",
    )
    fields = [field for field, _message in engines.problems(options)]
    assert fields == ["script", "latency_limit", "connect", "max_tries", "tables", "table_size"]
    bad_engine = cmd.RunOptions(clients=1, threads=1, duration_s=1, engine="hammerdb")
    assert [field for field, _m in engines.problems(bad_engine)] == ["engine"]
