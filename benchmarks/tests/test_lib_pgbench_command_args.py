"""The pgbench command builder's output: exact argument lists for runs and initialization, the
environment that carries the password, the command shown (redacted) and the exact command to
repeat a run, and the number of threads it picks."""

from __future__ import annotations

import shlex

import pytest

from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_command import (
    ConnectionTarget,
    InitOptions,
    RunOptions,
    build_env,
    build_init_args,
    build_run_args,
    check_custom_script_args,
    default_threads,
    display_command,
)
from benchmarks.lib.pgbench_output import ProgressShape
from benchmarks.lib.pgbench_txlog import TxLogFormat

PGBENCH = "/usr/lib/postgresql/15/bin/pgbench"
SECRET = "s3cr3t-'pa ss'"
DIRECT = ConnectionTarget("127.0.0.1", 25060, "doadmin", "benchmark")
POOL = ConnectionTarget("127.0.0.1", 25061, "doadmin", "test-pool")


def test_baseline_run_args() -> None:
    options = RunOptions(clients=50, threads=2, duration_s=30)
    assert build_run_args(PGBENCH, DIRECT, options) == [
        PGBENCH,
        "-h", "127.0.0.1", "-p", "25060", "-U", "doadmin",
        "-c", "50", "-j", "2", "-T", "30", "-P", "1",
        "-b", "tpcb-like", "-M", "simple",
        "--", "benchmark",
    ]  # fmt: skip


def test_every_run_option() -> None:
    options = RunOptions(
        clients=150,
        threads=2,
        transactions=1000,
        progress_interval_s=5,
        builtin="select-only",
        query_mode="prepared",
        rate=500,
        latency_limit_ms=12.5,
        connect_per_transaction=True,
        max_tries=3,
        failures_detailed=True,
        log_transactions=True,
        log_prefix="/var/lib/panel/runs/42/tx",
        sampling_rate=0.01,
        report_per_command=True,
        no_vacuum=True,
    )
    assert build_run_args("pgbench", POOL, options) == [
        "pgbench",
        "-h", "127.0.0.1", "-p", "25061", "-U", "doadmin",
        "-c", "150", "-j", "2", "-t", "1000", "-P", "5",
        "-b", "select-only", "-M", "prepared",
        "--rate=500", "--latency-limit=12.5", "-C", "--max-tries=3", "--failures-detailed", "-r", "-n",
        "-l", "--log-prefix=/var/lib/panel/runs/42/tx", "--sampling-rate=0.01",
        "--", "test-pool",
    ]  # fmt: skip
    assert options.progress_shape == ProgressShape(lag=True, skipped=True, retries=True)
    assert options.txlog_format == TxLogFormat(schedule_lag=True, retries=True)


def test_custom_script_skips_vacuum_unless_asked() -> None:
    custom = RunOptions(clients=4, threads=2, duration_s=10, custom_script_path="/srv/s.sql")
    args = build_run_args("pgbench", DIRECT, custom)
    assert args[args.index("-f") + 1] == "/srv/s.sql"
    assert "-b" not in args and "-n" in args
    assert custom.script == "custom" and custom.script_uses_transactions is None
    with_vacuum = RunOptions(
        clients=4, threads=2, duration_s=10, custom_script_path="/srv/s.sql", no_vacuum=False
    )
    assert "-n" not in build_run_args("pgbench", DIRECT, with_vacuum)
    assert "-n" not in build_run_args("pgbench", DIRECT, RunOptions(clients=4, threads=2, duration_s=10))


def test_aggregate_log_args() -> None:
    options = RunOptions(clients=10, threads=2, duration_s=15, log_transactions=True, aggregate_interval_s=1)
    assert build_run_args("pgbench", DIRECT, options)[-4:] == [
        "-l",
        "--aggregate-interval=1",
        "--",
        "benchmark",
    ]


def test_odd_database_names_stay_database_names() -> None:
    dash = ConnectionTarget("h", 1, "u", "-pool")
    assert build_run_args("pgbench", dash, RunOptions(clients=1, threads=1, duration_s=1))[-2:] == [
        "--",
        "-pool",
    ]
    sneaky = ConnectionTarget("h", 1, "u", "db host=evil")
    assert build_init_args("pgbench", sneaky, InitOptions(scale=1))[-1] == "dbname='db host=evil'"
    uri = ConnectionTarget("h", 1, "u", "postgresql://evil/db")
    assert build_init_args("pgbench", uri, InitOptions(scale=1))[-1] == "dbname='postgresql://evil/db'"


def test_init_args() -> None:
    assert build_init_args(PGBENCH, DIRECT, InitOptions(scale=150)) == [
        PGBENCH, "-i", "-h", "127.0.0.1", "-p", "25060", "-U", "doadmin", "-s", "150", "--", "benchmark",
    ]  # fmt: skip
    options = InitOptions(scale=20, init_steps="dtGvp", foreign_keys=True, unlogged_tables=True)
    assert build_init_args("pgbench", DIRECT, options)[8:] == [
        "-s", "20", "-I", "dtGvp", "--foreign-keys", "--unlogged-tables", "--", "benchmark",
    ]  # fmt: skip


def test_password_goes_to_the_environment_never_the_arguments() -> None:
    options = RunOptions(clients=1, threads=1, duration_s=1)
    args = build_run_args("pgbench", DIRECT, options) + build_init_args(
        "pgbench", DIRECT, InitOptions(scale=1)
    )
    env = build_env(SECRET, "require", base={"PATH": "/usr/bin", "PGHOST": "elsewhere", "PGDATABASE": "x"})
    assert all(SECRET not in arg for arg in args)
    assert env == {
        "PATH": "/usr/bin",
        "LC_ALL": "C",
        "PGPASSWORD": SECRET,
        "PGSSLMODE": "require",
        "PGCONNECT_TIMEOUT": "10",
    }


def test_passfile_replaces_the_password_variable() -> None:
    env = build_env(SECRET, "verify-full", passfile="/run/p/.pgpass", sslrootcert="/ca.crt", base={})
    assert "PGPASSWORD" not in env
    assert (env["PGPASSFILE"], env["PGSSLMODE"], env["PGSSLROOTCERT"]) == (
        "/run/p/.pgpass",
        "verify-full",
        "/ca.crt",
    )


def test_display_command_redacts_and_quotes() -> None:
    target = ConnectionTarget("db.example", 25060, "doadmin", "my db")
    options = RunOptions(clients=50, threads=2, duration_s=30, custom_script_path="/srv/it's.sql")
    args = build_run_args(PGBENCH, target, options)
    env = build_env(
        SECRET, "require", base={"PATH": "/usr/bin", "HOME": "/root"}, application_name="panel run 7"
    )
    shown = display_command(args, env)
    assert shown == (
        "PGPASSWORD=******** PGSSLMODE=require PGCONNECT_TIMEOUT=10 PGAPPNAME='panel run 7' "
        "pgbench -h db.example -p 25060 -U doadmin -c 50 -j 2 -T 30 -P 1 "
        "-f '/srv/it'\"'\"'s.sql' -M simple -n -- 'my db'"
    )
    assert SECRET not in shown
    # Once the password is substituted, a shell reads back exactly the argument list.
    assert shlex.split(shown)[4:] == ["pgbench", *args[1:]]
    assert display_command(args, program=PGBENCH).startswith(f"{PGBENCH} -h db.example")


def test_check_custom_script_args() -> None:
    assert check_custom_script_args("pgbench", "script.sql", "/tmp/x") == [
        "pgbench", "-h", "/tmp/x", "-p", "1", "-U", "script_check", "-n", "-t", "1",
        "-M", "simple", "-f", "script.sql", "--", "script_check",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("clients", "cpus", "expected"),
    [(50, 2, 2), (150, 2, 2), (1, 8, 1), (7, 4, 4), (9, 4, 3), (12, 8, 6), (100, None, 1), (3, 0, 1)],
)
def test_default_threads(clients: int, cpus: int | None, expected: int) -> None:
    assert default_threads(clients, cpus) == expected


def test_exact_command_renders_the_argv_with_secrets_and_the_workdir_as_variables() -> None:
    workdir = "/tmp/pgbench-run-abc-x1"
    argv = [
        "/usr/lib/postgresql/15/bin/pgbench", "-h", "127.0.0.1", "-p", "26900", "-U", "app user",
        "-c", "4", "-j", "2", "-T", "5", "-P", "1", "-f", f"{workdir}/script.sql", "-M", "simple",
        "-l", f"--log-prefix={workdir}/txlog", "--", "defaultdb",
    ]  # fmt: skip
    env = cmd.spawned_env(
        {"PATH": "/usr/bin", "PGPASSWORD": "s3cret", "PGSSLMODE": "require", "LC_ALL": "C", "HOME": "/x"}
    )
    assert env == {"PGPASSWORD": None, "PGSSLMODE": "require", "LC_ALL": "C"}
    shown = cmd.exact_command(argv, env, workdir, "SELECT 1;")
    assert "s3cret" not in shown and workdir not in shown
    lines = shown.splitlines()
    assert lines[0] == "WORKDIR=$(mktemp -d)"
    assert lines[1] == "cat > \"$WORKDIR\"/script.sql <<'PGBENCH_SCRIPT'"
    assert lines[2:4] == ["SELECT 1;", "PGBENCH_SCRIPT"]
    assert lines[4] == (
        'PGPASSWORD="$PGPASSWORD" PGSSLMODE=require LC_ALL=C /usr/lib/postgresql/15/bin/pgbench '
        "-h 127.0.0.1 -p 26900 -U 'app user' -c 4 -j 2 -T 5 -P 1 -f \"$WORKDIR\"/script.sql -M simple "
        '-l --log-prefix="$WORKDIR"/txlog -- defaultdb'
    )
    # Without a work directory in the arguments it is shlex.join of the argv behind the variables.
    plain = cmd.exact_command(argv[:5], {"PGPASSWORD": None}, workdir)
    assert plain == 'PGPASSWORD="$PGPASSWORD" ' + shlex.join(argv[:5])


def test_run_options_gives_one_thread_per_cpu_unless_threads_are_chosen() -> None:
    assert cmd.run_options(clients=8, duration_s=5, cpu_count=4).threads == 4
    assert cmd.run_options(clients=8, threads=2, duration_s=5, cpu_count=4).threads == 2
    assert cmd.run_options(clients=3, duration_s=5, cpu_count=16).threads == 3
    assert cmd.run_options(clients=8, duration_s=5, builtin=None).script == "tpcb-like"
