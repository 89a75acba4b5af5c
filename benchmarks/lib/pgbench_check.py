"""Check a custom script, or a whole set of run options, with pgbench's own parser before queueing.

pgbench checks its options and parses its scripts before it connects: pointed at an empty
temporary directory as its Unix-socket "host", it ends with an immediate connection error when
everything is acceptable, and with its own message otherwise. No server and no network are involved.

This module spawns nothing: it builds the arguments and reads the verdict. The caller passes a
``probe``, :func:`benchmarks.engine.runner.probe`, which runs pgbench as the bench user in a private work
directory (the runner is the only module that spawns pgbench).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from benchmarks.lib.pgbench_command import (
    QUERY_MODES,
    ConnectionTarget,
    RunOptions,
    build_run_args,
    check_custom_script_args,
)
from benchmarks.lib.pgbench_output import CONNECTION_FAILED, NO_CONNECTION, parse_error_line

SCRIPT_NAME = "script.sql"


@dataclass(frozen=True)
class CheckResult:
    """The verdict; ``message`` is pgbench's own explanation when it refused."""

    ok: bool
    message: str = ""


@dataclass(frozen=True)
class ProbeOutcome:
    """How one pgbench check ended: its exit code (None: stopped at the time limit) and stderr, or
    ``error`` when it could not start at all."""

    returncode: int | None
    stderr: str
    error: str = ""


# probe(args_in, files, timeout_s): write ``files`` (name -> text) in an empty private directory,
# run ``args_in(directory)`` there (as the directory's cwd) for at most ``timeout_s`` seconds.
Probe = Callable[[Callable[[str], list[str]], Mapping[str, str], float], ProbeOutcome]


def _reached_connection(stderr: str) -> bool:
    for line in stderr.splitlines():
        error = parse_error_line(line)
        if error is not None and error.kind in (CONNECTION_FAILED, NO_CONNECTION):
            return True
    return False


def _explain(stderr: str, returncode: int) -> str:
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return f"pgbench refused the script (exit code {returncode}) without a message."
    lines[0] = lines[0].removeprefix("pgbench: ").removeprefix("error: ")
    return "\n".join(lines)


def verdict(outcome: ProbeOutcome, timeout_s: float) -> CheckResult:
    """Acceptable when pgbench got as far as connecting; otherwise its own words."""
    if outcome.error:
        return CheckResult(False, outcome.error)
    if outcome.returncode is None:
        return CheckResult(False, f"pgbench did not finish checking within {timeout_s:g} s.")
    if outcome.returncode == 1 and _reached_connection(outcome.stderr):
        return CheckResult(True)
    return CheckResult(False, _explain(outcome.stderr, outcome.returncode))


def check_custom_script(
    pgbench_path: str, script_text: str, *, probe: Probe, query_mode: str = "simple", timeout_s: float = 10.0
) -> CheckResult:
    """Run pgbench's parser on ``script_text``; ``ok`` when pgbench got as far as connecting."""
    if query_mode not in QUERY_MODES:
        return CheckResult(False, f"Unknown query mode {query_mode!r}.")
    if not script_text.strip():
        return CheckResult(False, "The script is empty.")

    def args_in(workdir: str) -> list[str]:
        # A relative script path (pgbench starts in workdir): its messages then name "script.sql:LINE".
        return check_custom_script_args(pgbench_path, SCRIPT_NAME, workdir, query_mode)

    return verdict(probe(args_in, {SCRIPT_NAME: script_text}, timeout_s), timeout_s)


def check_run_options(
    pgbench_path: str,
    options: RunOptions,
    *,
    probe: Probe,
    custom_script: str | None = None,
    timeout_s: float = 10.0,
) -> CheckResult:
    """Let pgbench itself accept or refuse ``options`` (as :func:`build_run_args` renders them).

    ``custom_script`` (the text) is written next to the check and replaces
    ``options.custom_script_path``, so this also parses it.
    """
    if custom_script is not None:
        options = replace(options, builtin=None, custom_script_path=SCRIPT_NAME)

    def args_in(workdir: str) -> list[str]:
        target = ConnectionTarget(workdir, 1, "options_check", "options_check", "disable")
        return build_run_args(pgbench_path, target, options)

    files = {SCRIPT_NAME: custom_script} if custom_script is not None else {}
    return verdict(probe(args_in, files, timeout_s), timeout_s)
