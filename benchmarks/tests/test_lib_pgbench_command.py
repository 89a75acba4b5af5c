"""The pgbench command builder: exact argument lists, secrets, validation and warnings."""

from __future__ import annotations

import shlex

import pytest

from benchmarks.lib import engines
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
    validate,
    validate_init,
    warnings,
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


def test_valid_options_have_no_errors() -> None:
    assert validate(RunOptions(clients=50, threads=2, duration_s=30)) == []
    assert validate(RunOptions(clients=1, threads=1, transactions=10, max_tries=0, latency_limit_ms=5)) == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (RunOptions(clients=0, threads=1, duration_s=1), "Clients must be between 1 and 10,000."),
        (RunOptions(clients=10_001, threads=1, duration_s=1), "Clients must be between 1 and 10,000."),
        (RunOptions(clients=4, threads=0, duration_s=1), "Threads must be at least 1."),
        (RunOptions(clients=4, threads=8, duration_s=1), "Threads (8) cannot exceed clients (4)."),
        (
            RunOptions(clients=4, threads=1),
            "Give a duration or a number of transactions per client.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, transactions=5),
            "Give a duration or a number of transactions per client, not both.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=86_401),
            "Duration must be between 1 and 86,400 seconds.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, progress_interval_s=0),
            "Progress interval must be between 1 and 3,600 seconds.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, builtin="tpcc"),
            "Unknown built-in script 'tpcc': choose one of tpcb-like, simple-update, select-only.",
        ),
        (
            RunOptions(
                clients=4, threads=1, duration_s=5, builtin="select-only", custom_script_path="/s.sql"
            ),
            "Choose a built-in script or a custom script, not both.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, query_mode="fast"),
            "Unknown query mode 'fast': choose one of simple, extended, prepared.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, rate=0),
            "Rate must be greater than 0 transactions per second.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, latency_limit_ms=-1),
            "Latency limit must be greater than 0 ms.",
        ),
        (
            RunOptions(clients=4, threads=1, transactions=5, max_tries=0),
            "Unlimited tries need a latency limit or a duration.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, sampling_rate=0.1),
            "Log prefix, sampling rate and aggregate interval need the transaction log (-l).",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=5, log_transactions=True, sampling_rate=1.5),
            "Sampling rate must be greater than 0 and at most 1.",
        ),
        (
            RunOptions(
                clients=4,
                threads=1,
                duration_s=10,
                log_transactions=True,
                sampling_rate=0.5,
                aggregate_interval_s=5,
            ),
            "Sampling and aggregation cannot be used together.",
        ),
        (
            RunOptions(clients=4, threads=1, duration_s=10, log_transactions=True, aggregate_interval_s=3),
            "The duration must be a multiple of the aggregate interval.",
        ),
    ],
)
def test_validation_messages(options: RunOptions, message: str) -> None:
    assert message in validate(options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (InitOptions(scale=0), "Scale must be between 1 and 100,000."),
        (
            InitOptions(scale=1, init_steps="dtxq"),
            "Unknown initialization step 'q', 'x': allowed steps are d, t, g, G, v, p, f.",
        ),
        (InitOptions(scale=1, init_steps=""), "Give at least one initialization step."),
        (InitOptions(scale=1, init_steps="dtgg"), "Each initialization step may appear only once."),
        (
            InitOptions(scale=1, init_steps="dtgGvp"),
            "Generate data client-side (g) or server-side (G), not both.",
        ),
    ],
)
def test_init_validation_messages(options: InitOptions, message: str) -> None:
    assert validate_init(options) == [message]


def test_valid_init_options() -> None:
    assert validate_init(InitOptions(scale=150, init_steps="dtGvpf", foreign_keys=True)) == []


BASELINE = RunOptions(clients=50, threads=2, duration_s=30)
OVERLOAD = RunOptions(clients=150, threads=2, duration_s=30)


def test_no_warnings_for_the_baseline() -> None:
    assert warnings(BASELINE, scale=150, target_max_connections=97) == []


def test_it_warns_about_branch_contention() -> None:
    [message] = warnings(BASELINE, scale=20)
    assert str(message).startswith(
        "50 clients on a scale of 20: every TPC-B-like transaction updates one of 20 branch rows"
    )
    select_only = RunOptions(clients=50, threads=2, duration_s=30, builtin="select-only")
    assert warnings(select_only, scale=20) == []


def test_it_warns_that_a_direct_server_will_refuse_clients() -> None:
    [message] = warnings(OVERLOAD, scale=150, target_max_connections=97)
    assert str(message).startswith("150 clients but the server accepts at most 97 connections for this user")
    [pooled] = warnings(OVERLOAD, scale=150, target_max_connections=100, pool_mode="transaction")
    assert str(pooled).startswith("150 clients but PgBouncer accepts at most 100 client connections")


def test_it_warns_about_transactions_in_statement_pools() -> None:
    [message] = warnings(RunOptions(clients=10, threads=2, duration_s=10), pool_mode="statement")
    assert "transaction blocks not allowed in statement pooling mode" in message
    simple_update = RunOptions(clients=10, threads=2, duration_s=10, builtin="simple-update")
    assert len(warnings(simple_update, pool_mode="statement")) == 1
    select_only = RunOptions(clients=10, threads=2, duration_s=10, builtin="select-only")
    assert warnings(select_only, pool_mode="statement") == []
    custom = RunOptions(clients=10, threads=2, duration_s=10, custom_script_path="/s.sql")
    assert warnings(custom, pool_mode="statement") == []
    assert len(warnings(custom, pool_mode="statement", script_uses_transactions=True)) == 1


def test_it_warns_about_prepared_statements_on_old_pgbouncer() -> None:
    prepared = RunOptions(clients=4, threads=2, duration_s=5, query_mode="prepared")
    [message] = warnings(prepared, pool_mode="transaction", pgbouncer_version="1.18.0")
    assert str(message).startswith("PgBouncer 1.18.0 does not track prepared statements in transaction pools")
    assert len(warnings(prepared, pool_mode="transaction")) == 1  # unknown version
    assert warnings(prepared, pool_mode="transaction", pgbouncer_version="PgBouncer 1.21.0") == []
    assert warnings(prepared, pool_mode="transaction", pgbouncer_version=(1, 22)) == []
    assert warnings(prepared, pool_mode="session", pgbouncer_version="1.18") == []
    assert warnings(prepared) == []


def test_it_warns_about_session_pools_smaller_than_the_clients() -> None:
    [message] = warnings(OVERLOAD, pool_mode="session", pool_size=20)
    assert str(message).startswith(
        "In session mode each client keeps a server connection for its whole session: 130 of 150"
    )


def test_it_warns_about_uneven_threads_and_silent_progress() -> None:
    uneven = RunOptions(clients=10, threads=3, duration_s=5, progress_interval_s=10, builtin="select-only")
    assert warnings(uneven) == [
        "10 clients do not divide evenly among 3 threads: some threads will drive more clients than others.",
        "The progress interval is longer than the run: no progress will be reported.",
    ]


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


@pytest.mark.parametrize(
    ("options", "field"),
    [
        (RunOptions(clients=0, threads=1, duration_s=1), "clients"),
        (RunOptions(clients=4, threads=8, duration_s=1), "threads"),
        (RunOptions(clients=4, threads=1), "duration"),
        (RunOptions(clients=4, threads=1, transactions=0), "transactions"),
        (RunOptions(clients=4, threads=1, duration_s=1, progress_interval_s=0), "progress"),
        (RunOptions(clients=4, threads=1, duration_s=1, builtin="nope"), "script"),
        (RunOptions(clients=4, threads=1, duration_s=1, query_mode="nope"), "query_mode"),
        (RunOptions(clients=4, threads=1, duration_s=1, rate=0), "rate"),
        (RunOptions(clients=4, threads=1, duration_s=1, latency_limit_ms=0), "latency_limit"),
        (RunOptions(clients=4, threads=1, transactions=5, max_tries=0), "max_tries"),
    ],
)
def test_each_problem_names_the_form_field_it_is_about(options: RunOptions, field: str) -> None:
    found = engines.problems(options)
    assert [f for f, _message in found] == [field]
    assert cmd.validate(options) == [message for _f, message in found]


def test_run_options_gives_one_thread_per_cpu_unless_threads_are_chosen() -> None:
    assert cmd.run_options(clients=8, duration_s=5, cpu_count=4).threads == 4
    assert cmd.run_options(clients=8, threads=2, duration_s=5, cpu_count=4).threads == 2
    assert cmd.run_options(clients=3, duration_s=5, cpu_count=16).threads == 3
    assert cmd.run_options(clients=8, duration_s=5, builtin=None).script == "tpcb-like"
