"""The engine interface (pure): one engine per tool, and options that serialise themselves."""

from __future__ import annotations

from benchmarks.lib import engines, pgbench_command, sysbench_command
from benchmarks.lib.run_options import ConnectionTarget, RunOptions

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
    sysbench = RunOptions(
        clients=4,
        threads=4,
        duration_s=5,
        engine="sysbench",
        builtin="oltp_read_only",
        tables=2,
        table_size=100,
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
