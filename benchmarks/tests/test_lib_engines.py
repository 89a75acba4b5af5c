"""The engine interface (pure): one engine per tool, and options that serialise themselves."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from benchmarks.lib import engines, pgbench_command, sysbench_command
from benchmarks.lib.engine_base import FieldSpec, Sample
from benchmarks.lib.run_options import ConnectionTarget, RunOptions

FIXTURES = Path(__file__).parent / "fixtures"

TARGET = ConnectionTarget(host="127.0.0.1", port=26000, user="doadmin", dbname="defaultdb")


def test_options_cross_into_a_row_and_back() -> None:
    options = RunOptions(clients=10, threads=2, duration_s=20, rate=500.0, max_tries=3, log_prefix="/tmp/x")
    stored = options.to_json()
    assert not set(RunOptions.EXECUTION_KEYS) & set(stored)  # decided where the run executes
    assert RunOptions.from_json(stored) == RunOptions(
        clients=10, threads=2, duration_s=20, rate=500.0, max_tries=3
    )
    assert RunOptions.from_json({**stored, "from_a_newer_version": 1}) == RunOptions.from_json(stored)


def test_each_engine_builds_its_tools_arguments_and_the_same_libpq_environment() -> None:
    assert set(engines.ENGINES) == {"pgbench", "sysbench"}
    pgbench = RunOptions(clients=4, threads=2, duration_s=5)
    assert engines.ENGINES["pgbench"].run_args("pgbench", TARGET, pgbench) == pgbench_command.build_run_args(
        "pgbench", TARGET, pgbench
    )
    sysbench = replace(
        pgbench, threads=4, engine="sysbench", builtin="oltp_read_only", tables=2, table_size=100
    )
    assert engines.ENGINES["sysbench"].run_args(
        "sysbench", TARGET, sysbench
    ) == sysbench_command.build_run_args("sysbench", TARGET, sysbench)
    for engine in engines.ENGINES.values():
        env = engine.env("s3cret", "require", base={"PATH": "/usr/bin", "PGHOST": "x"}, application_name="a")
        assert (
            env["PGPASSWORD"] == "s3cret"
            and "PGHOST" not in env
            and "s3cret"
            not in engine.run_args(engine.name, TARGET, sysbench if engine.name == "sysbench" else pgbench)
        )


def test_warnings_are_the_engines_and_an_unknown_engine_is_a_problem() -> None:
    context = engines.LaunchContext(target_max_connections=22, pool_mode=None)
    over = RunOptions(clients=50, threads=2, duration_s=5)
    assert [m.code for m in engines.ENGINES["pgbench"].warnings(over, context)] == [
        "run.warn_over_server_limit"
    ]
    assert [
        field for field, _m in engines.problems(RunOptions(clients=1, threads=1, duration_s=1, engine="k6"))
    ] == ["engine"]


def test_sysbench_turns_prepared_statements_off_through_a_pool_and_pgbench_keeps_its_mode() -> None:
    sysbench = RunOptions(clients=4, threads=4, duration_s=5, engine="sysbench", builtin="oltp_read_only")
    assert engines.ENGINES["sysbench"].for_target(sysbench, "transaction").query_mode == "disable"
    assert engines.ENGINES["sysbench"].for_target(sysbench, None).query_mode == "auto"
    pgbench = RunOptions(clients=4, threads=2, duration_s=5, query_mode="prepared")
    assert engines.ENGINES["pgbench"].for_target(pgbench, "transaction") == pgbench


# --- the readers every engine gives the services: a line → a sample or an error, the exit → an outcome


def _tagged(name: str) -> list[tuple[str, str]]:
    """(stream, text) of a pgbench capture: ``[  1.063] E| progress: …``."""
    lines = []
    for line in (FIXTURES / "pgbench" / name).read_text().splitlines():
        if line.startswith("[") and "| " in line:
            tag, text = line.split("] ", 1)[1].split("| ", 1)
            lines.append(("stderr" if tag == "E" else "stdout", text + "\n"))
    return lines


def test_pgbench_reader_turns_its_streams_into_samples_and_a_summary() -> None:
    reader = engines.ENGINES["pgbench"].reader(RunOptions(clients=50, threads=2, duration_s=30))
    events = [reader.feed(stream, text) for stream, text in _tagged("a_direct_c50.tagged.txt")]
    samples = [event for event in events if isinstance(event, Sample)]
    assert len(samples) >= 29 and samples[0] == Sample(1.0, 1692.7, 20.273, 7.558, failed=0)
    outcome = reader.finish(0)
    assert outcome.status == "succeeded" and outcome.summary and outcome.summary["clients"] == 50


def test_pgbench_reader_says_why_a_refused_run_failed() -> None:
    reader = engines.ENGINES["pgbench"].reader(RunOptions(clients=30, threads=2, duration_s=5))
    for stream, text in _tagged("local_too_many_clients.tagged.txt"):
        reader.feed(stream, text)
    outcome = reader.finish(1)
    assert outcome.status == "failed" and "could not start" in str(outcome.reason)
    assert outcome.summary is None


def test_sysbench_reader_reads_one_stream_into_samples_with_qps_and_a_summary() -> None:
    reader = engines.ENGINES["sysbench"].reader(
        RunOptions(engine="sysbench", clients=4, threads=4, duration_s=5)
    )
    text = (FIXTURES / "sysbench" / "rw_direct_c4_t5.txt").read_text()
    samples = [
        e for e in (reader.feed("stdout", line) for line in text.splitlines()) if isinstance(e, Sample)
    ]
    assert samples and all(s.qps and s.p95_ms and s.latency_avg_ms is None for s in samples)
    outcome = reader.finish(0)
    assert outcome.status == "succeeded" and outcome.summary and outcome.summary["clients"] == 4
    assert (
        engines.ENGINES["sysbench"]
        .reader(RunOptions(engine="sysbench", clients=4, threads=4))
        .finish(1)
        .status
        == "failed"
    )


def test_init_readers_give_a_percentage_and_the_first_error() -> None:
    pgbench = engines.ENGINES["pgbench"]
    reader = pgbench.init_reader(engines.DatasetSpec(scale=20))
    for line in (FIXTURES / "pgbench" / "init_s20.stderr.txt").read_text().splitlines():
        reader.feed("stderr", line)
    assert reader.percent == 99 and not reader.first_error
    sysbench = engines.ENGINES["sysbench"]
    reader = sysbench.init_reader(engines.DatasetSpec(tables=2, table_size=10_000))
    for line in (FIXTURES / "sysbench" / "prepare_t2_s10000.txt").read_text().splitlines():
        reader.feed("stdout", line)
    assert reader.percent == 99 and "sbtest2" in str(reader.message)


def test_an_engines_own_fields_parse_their_values_and_cross_into_a_row_and_back() -> None:
    assert FieldSpec("n", "N", kind="int").parse("3") == 3
    assert FieldSpec("on", "On", kind="bool").parse("yes") is True
    for spec, raw in ((FieldSpec("n", "N", kind="int"), "x"), (FieldSpec("m", "M", kind="choice", choices=(("a", "A"),)), "b")):  # fmt: skip
        try:
            spec.parse(raw)
        except ValueError:
            continue
        raise AssertionError(f"{raw!r} accepted")
    options = RunOptions(clients=1, threads=1, duration_s=1, extra=(("statement", "SELECT 2"), ("n", 3)))
    stored = json.loads(json.dumps(options.to_json()))  # as the row's JSON column keeps it
    assert RunOptions.from_json(stored) == options and options.extra_values["n"] == 3
