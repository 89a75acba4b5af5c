"""Custom scripts checked by the real pgbench's parser, with no server (pgbench parses before connecting).

pgbench runs through the runner's probe (as the bench user, in a private work directory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchmarks.engine import runner
from benchmarks.lib import pgbench_check
from benchmarks.lib.pgbench_check import CheckResult, ProbeOutcome
from benchmarks.lib.pgbench_command import RunOptions

PGBENCH = next(
    (
        path
        for path in ("/usr/lib/postgresql/15/bin/pgbench", shutil.which("pgbench"))
        if path and Path(path).exists()
    ),
    None,
)
needs_pgbench = pytest.mark.skipif(PGBENCH is None, reason="pgbench is not installed")


def check_custom_script(pgbench: str, script: str, **kwargs: object) -> CheckResult:
    return pgbench_check.check_custom_script(pgbench, script, probe=runner.probe, **kwargs)  # type: ignore[arg-type]


def check_run_options(pgbench: str, options: RunOptions, **kwargs: object) -> CheckResult:
    return pgbench_check.check_run_options(pgbench, options, probe=runner.probe, **kwargs)  # type: ignore[arg-type]


GOOD = """\\set aid random(1, 100000 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
END;
"""


@needs_pgbench
def test_a_valid_script_passes() -> None:
    assert check_custom_script(str(PGBENCH), GOOD) == CheckResult(True)
    assert check_custom_script(str(PGBENCH), GOOD, query_mode="prepared") == CheckResult(True)


@needs_pgbench
def test_a_syntax_error_is_reported_with_pgbench_own_message() -> None:
    result = check_custom_script(str(PGBENCH), "SELECT 1;\n\\set x random(1,\n")
    assert not result.ok
    assert result.message.splitlines() == [
        'script.sql:2: syntax error in command "set"',
        "\\set x random(1,",
        "                ^ error found here",
    ]


@needs_pgbench
@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("BEGIN;\n\\foo bar\nEND;\n", 'script.sql:2: invalid command in command "foo"'),
        ("\\sleep abc xs\n", 'script.sql:1: invalid sleep time, must be an integer (abc) in command "sleep"'),
        ("-- only a comment\n", 'empty command list for script "script.sql"'),
    ],
)
def test_invalid_scripts_are_refused(script: str, message: str) -> None:
    result = check_custom_script(str(PGBENCH), script)
    assert not result.ok
    assert result.message.splitlines()[0] == message


def test_blank_script_and_bad_mode_are_refused_without_running_pgbench() -> None:
    assert check_custom_script("/nonexistent/pgbench", "  \n") == CheckResult(False, "The script is empty.")
    assert check_custom_script("/nonexistent/pgbench", GOOD, query_mode="x") == CheckResult(
        False, "Unknown query mode 'x'."
    )


def test_missing_pgbench_and_timeouts_are_explained() -> None:
    assert check_custom_script("/nonexistent/pgbench", GOOD) == CheckResult(
        False,
        "Could not run pgbench: No such file or directory.",  # its name: the page shows no path
    )
    # The runner stops a check at its time limit (here a program that never ends).
    outcome = runner.probe(lambda _workdir: ["/bin/sleep", "5"], {}, 0.3)
    assert outcome.returncode is None
    assert pgbench_check.verdict(outcome, 0.3) == CheckResult(
        False, "pgbench did not finish checking within 0.3 s."
    )
    assert pgbench_check.verdict(ProbeOutcome(None, "", "Could not run x."), 1) == CheckResult(
        False, "Could not run x."
    )


@needs_pgbench
@pytest.mark.parametrize(
    "options",
    [
        RunOptions(clients=50, threads=2, duration_s=30),
        RunOptions(
            clients=150, threads=2, duration_s=20, connect_per_transaction=True, builtin="simple-update"
        ),
        RunOptions(
            clients=10,
            threads=2,
            duration_s=10,
            rate=5000,
            latency_limit_ms=5,
            max_tries=3,
            failures_detailed=True,
            report_per_command=True,
            log_transactions=True,
            aggregate_interval_s=1,
            log_prefix="/nonexistent/agg",
        ),
        RunOptions(
            clients=4,
            threads=1,
            transactions=100,
            builtin="select-only",
            query_mode="prepared",
            log_transactions=True,
            sampling_rate=0.01,
            no_vacuum=True,
        ),
    ],
)
def test_pgbench_accepts_the_arguments_the_builder_makes(options: RunOptions) -> None:
    assert check_run_options(str(PGBENCH), options) == CheckResult(True)


@needs_pgbench
def test_pgbench_refusals_come_back_in_its_own_words() -> None:
    # Options validate() would refuse, sent anyway: pgbench's own checks agree.
    both = RunOptions(
        clients=4, threads=1, duration_s=10, log_transactions=True, sampling_rate=0.5, aggregate_interval_s=5
    )
    result = check_run_options(str(PGBENCH), both)
    assert result == CheckResult(
        False,
        "log sampling (--sampling-rate) and aggregation (--aggregate-interval) cannot be used at the same time",
    )
    custom = RunOptions(clients=1, threads=1, duration_s=1)
    refused = check_run_options(str(PGBENCH), custom, custom_script="\\set x\n")
    assert not refused.ok and "script.sql:1: " in refused.message
