"""Per-transaction and aggregate pgbench logs: real files, percentiles, tailing a growing file."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from benchmarks.lib.pgbench_txlog import (
    AggregateRow,
    LatencyPercentiles,
    TxLogFormat,
    TxLogTail,
    TxRecord,
    parse_aggregate_line,
    parse_aggregate_log,
    parse_txlog,
    parse_txlog_line,
    percentile,
    percentiles_by_interval,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pgbench"
RATE_RETRIES = TxLogFormat(schedule_lag=True, retries=True)


def test_reference_txlog_with_retries_and_failures() -> None:
    records = parse_txlog((FIXTURES / "pgbench_log_txlog.20682.txt").read_text(), TxLogFormat(retries=True))
    assert len(records) == 8  # the "# file ..." header line is skipped
    assert records[0] == TxRecord(0, 22, "ok", 415, 0, 1795340806, 575825, None, 0)
    assert records[1] == TxRecord(1, 26, "failed", None, 0, 1795340806, 585199, None, 2)
    assert [record.status for record in records].count("failed") == 2
    assert records[-1].latency_ms == 2.286
    assert records[0].end_time == pytest.approx(1795340806.575825)


def test_seven_fields_need_the_format() -> None:
    line = "0 22 415 0 1795340806 575825 0"
    assert parse_txlog_line(line) is None  # 6 fields expected without --rate / --max-tries
    assert parse_txlog_line(line, TxLogFormat(schedule_lag=True)) == TxRecord(
        0, 22, "ok", 415, 0, 1795340806, 575825, 0
    )
    assert TxLogFormat.for_options(rate=None, max_tries=3) == TxLogFormat(retries=True)
    assert TxLogFormat.for_options(rate=100.0, max_tries=1) == TxLogFormat(schedule_lag=True)


@pytest.mark.parametrize(
    "line",
    ["", "# comment", "0 22 41", "0 22 abc 0 1 2", "0 22 -5 0 1 2", "0 1 2 3 4 5 6 7 8", "x 22 415 0 1 2"],
)
def test_malformed_lines_are_skipped(line: str) -> None:
    assert parse_txlog_line(line) is None
    assert parse_txlog_line(line, RATE_RETRIES) is None


def test_detailed_failure_and_skip_statuses() -> None:
    assert parse_txlog_line(
        "0 83 skipped 0 1412881037 914578 5217", TxLogFormat(schedule_lag=True)
    ) == TxRecord(0, 83, "skipped", None, 0, 1412881037, 914578, 5217)
    record = parse_txlog_line("0 0 serialization 0 1499414498 84905 9", TxLogFormat(retries=True))
    assert record is not None and record.status == "serialization" and record.retries == 9


def test_local_per_thread_logs_with_rate_and_retries() -> None:
    first = parse_txlog((FIXTURES / "local_txlog_rate_retries.14066.txt").read_text(), RATE_RETRIES)
    second = parse_txlog((FIXTURES / "local_txlog_rate_retries.14066.1.txt").read_text(), RATE_RETRIES)
    assert (len(first), len(second)) == (157, 136)  # --sampling-rate=0.5 of 599 transactions
    assert first[0] == TxRecord(0, 1, "ok", 8378, 0, 1795355719, 933430, 96, 0)
    assert {record.client_id for record in first} == {0}
    assert {record.client_id for record in second} == {1}


def test_reference_aggregate_logs() -> None:
    rows = parse_aggregate_log((FIXTURES / "pgbench_log_agg.20292.txt").read_text())
    assert len(rows) == 8
    assert rows[0] == AggregateRow(
        1795340725, 1036, 3730049, 15672436187, 961, 13671, 0, 0, 0, 0, 0, 0, 0, 0, 0
    )
    assert rows[0].latency_avg_ms == pytest.approx(3.600, abs=1e-3)
    mean = 3730049 / 1036
    assert rows[0].latency_stddev_ms == pytest.approx(math.sqrt(15672436187 / 1036 - mean**2) / 1000)
    assert sum(row.transactions for row in rows) == 9998
    failures = parse_aggregate_log((FIXTURES / "pgbench_log_aggfail.20625.txt").read_text())
    assert len(failures) == 5
    first = failures[0]
    assert (first.retried, first.retries, first.serialization_failures, first.deadlock_failures) == (
        561,
        999,
        354,
        0,
    )


def test_aggregate_edge_cases() -> None:
    assert parse_aggregate_line("1795340725 1036 3730049") is None
    assert parse_aggregate_line("# file logs/agg.20292") is None
    empty = parse_aggregate_line("1795340725 0 0 0 0 0 0 0 0 0 0 0 0 0 0")
    assert empty is not None and empty.latency_avg_ms is None and empty.latency_stddev_ms is None


def _record(end: float, latency_us: int | None, status: str = "ok") -> TxRecord:
    epoch = math.floor(end)
    return TxRecord(0, 0, status, latency_us, 0, epoch, round((end - epoch) * 1_000_000))


def test_nearest_rank_percentile() -> None:
    values = [float(value) for value in range(1, 21)]  # 1..20
    assert percentile(values, 50) == 10.0  # rank ceil(0.5 * 20) = 10
    assert percentile(values, 95) == 19.0  # rank 19, not 20 despite 0.95 * 20 in binary floating point
    assert percentile(values, 99) == 20.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 0) == 1.0


def test_percentiles_by_interval_against_a_hand_computation() -> None:
    start = 1_000_000.0
    # Second 0: latencies 1..100 ms in shuffled completion order; second 2: three values; second 1: only
    # a failure and a skip, which have no latency and make no bucket.
    records = [_record(start + 0.005 * (i % 7) + 0.1, (101 - i) * 1000) for i in range(1, 101)]
    records += [_record(start + 2.5, 40_000), _record(start + 2.2, 10_000), _record(start + 2.9, 30_000)]
    records += [_record(start + 1.5, None, "failed"), _record(start + 1.6, None, "skipped")]
    records.append(_record(start - 0.0004, 2000))  # stamped a hair before the start: interval 0
    result = percentiles_by_interval(records, 1.0, start)
    # Interval 0 holds 1..100 ms plus 2 ms (101 values): p50 = 51st value = 50 ms, p95 = 96th = 95 ms,
    # p99 = 100th = 99 ms.
    assert result == {
        0: LatencyPercentiles(50.0, 95.0, 99.0, 101),
        2: LatencyPercentiles(30.0, 40.0, 40.0, 3),
    }
    two_second = percentiles_by_interval(records, 2.0, start)
    assert set(two_second) == {0, 1}
    with pytest.raises(ValueError):
        percentiles_by_interval(records, 0, start)


def test_tail_reads_appended_lines_and_waits_for_partial_ones(tmp_path: Path) -> None:
    main = tmp_path / "tx.4242"
    tail = TxLogTail(tmp_path / "tx", pid=4242, fmt=RATE_RETRIES)
    assert tail.poll() == []  # no file yet
    main.write_text("0 1 8378 0 1795355719 933430 96 0\n0 2 79")
    assert [record.transaction_no for record in tail.poll()] == [1]
    assert tail.poll() == []  # the partial line is held back
    with main.open("a") as handle:
        handle.write("88 0 1795355719 958599 197 0\n0 3 5095 0 1795355719 970588 157 0\n")
    [second, third] = tail.poll()
    assert (second.transaction_no, second.latency_us, third.transaction_no) == (2, 7988, 3)
    # The second thread's file appears later; other runs' files (other pid) are ignored.
    (tmp_path / "tx.4242.1").write_text("1 1 1114 0 1795355722 849601 91 0\n")
    (tmp_path / "tx.999").write_text("5 5 5 0 1795355722 849601 91 0\n")
    assert [record.client_id for record in tail.poll()] == [1]
    with main.open("a") as handle:
        handle.write("0 4 1000 0 1795355720 1 2 0")
    assert tail.poll() == []
    assert [record.transaction_no for record in tail.poll(final=True)] == [4]
    assert tail.poll(final=True) == []


def test_tail_without_pid_finds_every_thread_file_in_order(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "local_txlog_rate_retries.14066.1.txt", tmp_path / "txs.14066.1")
    shutil.copy(FIXTURES / "local_txlog_rate_retries.14066.txt", tmp_path / "txs.14066")
    (tmp_path / "txs.14066.sql").write_text("not a log\n")
    tail = TxLogTail(str(tmp_path / "txs"), fmt=RATE_RETRIES)
    assert [path.name for path in tail.files()] == ["txs.14066", "txs.14066.1"]
    records = tail.poll()
    assert len(records) == 293
    by_second = percentiles_by_interval(records, 1.0, 1795355719.0)
    assert sum(bucket.count for bucket in by_second.values()) == 293
    assert sorted(by_second) == [0, 1, 2, 3]


def test_tail_starts_again_when_a_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "log.1"
    path.write_text("0 1 100 0 1 0\n0 2 100 0 1 0\n")
    tail = TxLogTail(tmp_path / "log")
    assert len(tail.poll()) == 2
    path.write_text("0 9 100 0 1 0\n")
    assert [record.transaction_no for record in tail.poll()] == [9]
    assert TxLogTail(tmp_path / "missing" / "log").poll() == []
