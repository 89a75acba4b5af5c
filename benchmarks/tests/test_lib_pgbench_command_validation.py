"""The pgbench command builder's validation: the message for each invalid run or initialization
option, and the form field each problem is about."""

from __future__ import annotations

import pytest

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_command import InitOptions, RunOptions, validate, validate_init


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
