"""Check a custom script, or a whole set of run options, with pgbench's own parser before queueing.

The only module of ``benchmarks.lib`` that spawns a process. pgbench checks its options and parses its
scripts before it connects: pointed at an empty temporary directory as its Unix-socket "host", it
ends with an immediate connection error when everything is acceptable, and with its own message
otherwise. No server and no network are involved.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib.pgbench_command import (
    QUERY_MODES,
    ConnectionTarget,
    RunOptions,
    build_env,
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


def _probe(args: list[str], workdir: str, timeout_s: float) -> CheckResult:
    env = build_env(None, None, connect_timeout_s=2, base={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    try:
        completed = subprocess.run(
            args,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError:
        return CheckResult(False, f"pgbench was not found at {args[0]}.")
    except subprocess.TimeoutExpired:
        return CheckResult(False, f"pgbench did not finish checking within {timeout_s:g} s.")
    if completed.returncode == 1 and _reached_connection(completed.stderr):
        return CheckResult(True)
    return CheckResult(False, _explain(completed.stderr, completed.returncode))


def check_custom_script(
    pgbench_path: str, script_text: str, *, query_mode: str = "simple", timeout_s: float = 10.0
) -> CheckResult:
    """Run pgbench's parser on ``script_text``; ``ok`` when pgbench got as far as connecting."""
    if query_mode not in QUERY_MODES:
        return CheckResult(False, f"Unknown query mode {query_mode!r}.")
    if not script_text.strip():
        return CheckResult(False, "The script is empty.")
    with tempfile.TemporaryDirectory(prefix="pgbench-check-") as workdir:
        Path(workdir, SCRIPT_NAME).write_text(script_text, encoding="utf-8")
        # Relative script path and cwd=workdir: pgbench's messages then name "script.sql:LINE".
        return _probe(
            check_custom_script_args(pgbench_path, SCRIPT_NAME, workdir, query_mode), workdir, timeout_s
        )


def check_run_options(pgbench_path: str, options: RunOptions, *, timeout_s: float = 10.0) -> CheckResult:
    """Let pgbench itself accept or refuse ``options`` (as :func:`build_run_args` renders them).

    A custom script is read from ``options.custom_script_path``, so this also parses it.
    """
    with tempfile.TemporaryDirectory(prefix="pgbench-check-") as workdir:
        target = ConnectionTarget(workdir, 1, "options_check", "options_check", "disable")
        return _probe(build_run_args(pgbench_path, target, options), workdir, timeout_s)
