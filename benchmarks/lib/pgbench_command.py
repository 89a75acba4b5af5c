"""Build pgbench command lines (argument lists, never shell strings) and check run options.

The password never goes into the arguments: :func:`build_env` puts it in ``PGPASSWORD`` (or points
``PGPASSFILE`` at a 0600 file), and :func:`display_command` shows a reproducible shell command with
it redacted.

Vacuum: before a run pgbench VACUUMs ``pgbench_branches``/``pgbench_tellers`` and truncates
``pgbench_history``. Its errors are ignored by pgbench ("ignoring this error and continuing anyway")
and a role that does not own the tables only gets a WARNING, so ``-n`` is not needed for rights, nor
through pools (PgBouncer runs VACUUM as a single statement, also in statement mode). Runs keep the
vacuum by default, so runs on the same data set start from the same state and stay comparable;
custom scripts skip it (``-n``), as pgbench's documentation advises, because their database need
not hold the pgbench tables.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence

from benchmarks.lib.run_options import (
    MAX_CLIENTS,
    MAX_DURATION_S,
    MAX_PROGRESS_S,
    MAX_SCALE,
    PASSWORD_PLACEHOLDER,
    QUERY_MODES,
    SECRET_ENV_KEYS,
    ConnectionTarget,
    InitOptions,
    RunOptions,
    default_threads,
    run_options,
)
from benchmarks.lib.run_problems import init_problems, validate, validate_init
from benchmarks.lib.run_warnings import warnings

__all__ = [
    "MAX_CLIENTS",
    "MAX_DURATION_S",
    "MAX_PROGRESS_S",
    "MAX_SCALE",
    "PASSWORD_PLACEHOLDER",
    "QUERY_MODES",
    "SECRET_ENV_KEYS",
    "WORKDIR_VARIABLE",
    "ConnectionTarget",
    "InitOptions",
    "RunOptions",
    "build_env",
    "build_init_args",
    "build_run_args",
    "check_custom_script_args",
    "default_threads",
    "display_command",
    "exact_command",
    "run_options",
    "spawned_env",
    "validate",
    "init_problems",
    "validate_init",
    "warnings",
]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _dbname_argument(dbname: str) -> str:
    # pgbench hands its database argument to libpq with expand_dbname: a name that looks like a
    # connection string would be read as one (and could override the host). Quote such names.
    if "=" in dbname or re.match(r"postgres(?:ql)?://", dbname):
        escaped = dbname.replace("\\", "\\\\").replace("'", "\\'")
        return f"dbname='{escaped}'"
    return dbname


def _connection_args(target: ConnectionTarget) -> list[str]:
    return ["-h", target.host, "-p", str(target.port), "-U", target.user]


def build_run_args(pgbench_path: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
    """The argument list of a run; call :func:`validate` first."""
    args = [pgbench_path, *_connection_args(target), "-c", str(options.clients), "-j", str(options.threads)]
    if options.duration_s is not None:
        args += ["-T", str(options.duration_s)]
    else:
        args += ["-t", str(options.transactions)]
    args += ["-P", str(options.progress_interval_s)]
    if options.custom_script_path is not None:
        args += ["-f", options.custom_script_path]
    else:
        args += ["-b", options.script]
    args += ["-M", options.query_mode]
    if options.rate is not None:
        args.append(f"--rate={_number(options.rate)}")
    if options.latency_limit_ms is not None:
        args.append(f"--latency-limit={_number(options.latency_limit_ms)}")
    if options.connect_per_transaction:
        args.append("-C")
    if options.max_tries is not None:
        args.append(f"--max-tries={options.max_tries}")
    if options.failures_detailed:
        args.append("--failures-detailed")
    if options.report_per_command:
        args.append("-r")
    if options.skips_vacuum:
        args.append("-n")
    if options.log_transactions:
        args.append("-l")
        if options.log_prefix is not None:
            args.append(f"--log-prefix={options.log_prefix}")
        if options.sampling_rate is not None:
            args.append(f"--sampling-rate={_number(options.sampling_rate)}")
        if options.aggregate_interval_s is not None:
            args.append(f"--aggregate-interval={options.aggregate_interval_s}")
    # "--" ends the options: a pool may be named "-x".
    return [*args, "--", _dbname_argument(target.dbname)]


def build_init_args(pgbench_path: str, target: ConnectionTarget, options: InitOptions) -> list[str]:
    """The argument list of ``pgbench -i`` (no ``-q``: its per-100k-rows lines feed the progress bar)."""
    args = [pgbench_path, "-i", *_connection_args(target), "-s", str(options.scale)]
    if options.init_steps is not None:
        args += ["-I", options.init_steps]
    if options.foreign_keys:
        args.append("--foreign-keys")
    if options.unlogged_tables:
        args.append("--unlogged-tables")
    return [*args, "--", _dbname_argument(target.dbname)]


def check_custom_script_args(
    pgbench_path: str, script_path: str, socket_dir: str, query_mode: str = "simple"
) -> list[str]:
    """Arguments that make pgbench parse ``script_path`` and then fail to connect.

    pgbench parses every script before connecting, so a bad script exits 1 with its parser's message
    and a good one with a connection error. ``socket_dir`` should be an empty directory: the
    connection attempt then fails at once, without any network access.
    """
    return [
        pgbench_path, "-h", socket_dir, "-p", "1", "-U", "script_check", "-n", "-t", "1",
        "-M", query_mode, "-f", script_path, "--", "script_check",
    ]  # fmt: skip


def build_env(
    password: str | None,
    sslmode: str | None,
    *,
    passfile: str | None = None,
    sslrootcert: str | None = None,
    connect_timeout_s: int | None = 10,
    application_name: str | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a pgbench process: ``base`` (default ``os.environ``) without its own
    ``PG*`` variables, which would silently change the target, plus the connection secrets.

    ``LC_ALL=C`` keeps pgbench's messages and numbers in the form the parser reads.
    """
    env = {
        key: value
        for key, value in (os.environ if base is None else base).items()
        if not key.startswith("PG")
    }
    env["LC_ALL"] = "C"
    if passfile is not None:
        env["PGPASSFILE"] = passfile
    elif password is not None:
        env["PGPASSWORD"] = password
    if sslmode:
        env["PGSSLMODE"] = sslmode
    if sslrootcert:
        env["PGSSLROOTCERT"] = sslrootcert
    if connect_timeout_s is not None:
        env["PGCONNECT_TIMEOUT"] = str(connect_timeout_s)
    if application_name:
        env["PGAPPNAME"] = application_name
    return env


def display_command(
    args: Sequence[str], env: Mapping[str, str] | None = None, *, program: str | None = None
) -> str:
    """The equivalent shell command, for a person to reproduce a run.

    Shows the ``PG*`` variables of ``env`` with secrets redacted (``PGPASSWORD=******** pgbench ...``)
    and every argument shell-quoted. ``program`` replaces ``args[0]`` (default: its base name).
    """
    words: list[str] = []
    for key, value in (env or {}).items():
        if not key.startswith("PG"):
            continue
        shown = PASSWORD_PLACEHOLDER if key in SECRET_ENV_KEYS else shlex.quote(value)
        words.append(f"{key}={shown}")
    if args:
        words.append(shlex.quote(program or os.path.basename(args[0])))
        words.extend(shlex.quote(arg) for arg in args[1:])
    return " ".join(words)


WORKDIR_VARIABLE = "WORKDIR"
# Variables of pgbench's environment that decide what it does: shown in the command.
SHOWN_ENV_PREFIXES = ("PG", "LC_ALL")


def spawned_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """The variables of a spawned pgbench's environment the exact command needs, secret values
    replaced by None (what :class:`BenchmarkRun.argv_env` stores: never a password)."""
    return {
        key: None if key in SECRET_ENV_KEYS else value
        for key, value in env.items()
        if key.startswith(SHOWN_ENV_PREFIXES)
    }


def _word(arg: str, workdir: str) -> str:
    """One argument, shell-quoted (shlex's quoting), with the run's private work directory shown
    as ``"$WORKDIR"``: that directory is removed after the run, so a pasted command needs a new one."""
    if workdir and workdir in arg:
        head, _sep, tail = arg.partition(workdir)
        return (
            (shlex.quote(head) if head else "")
            + f'"${WORKDIR_VARIABLE}"'
            + (shlex.quote(tail) if tail else "")
        )
    return shlex.quote(arg)


def exact_command(
    argv: Sequence[str], env: Mapping[str, str | None], workdir: str = "", custom_script: str = ""
) -> str:
    """The argument list a run executed, as a bash snippet that repeats it when pasted.

    Secrets are variables the reader sets (``PGPASSWORD="$PGPASSWORD"``); the private work
    directory (transaction logs, the custom script) is ``"$WORKDIR"``, made fresh by the first line,
    and a custom script is written there by a here-document before pgbench starts.
    """
    lines: list[str] = []
    if workdir and any(workdir in arg for arg in argv):
        lines.append(f"{WORKDIR_VARIABLE}=$(mktemp -d)")
        script_arg = next(
            (arg for arg in argv if arg.startswith(workdir) and not arg.startswith(workdir + "/txlog")), ""
        )
        if custom_script and script_arg:
            marker = "PGBENCH_SCRIPT"
            while marker in custom_script:
                marker += "_END"
            body = custom_script if custom_script.endswith("\n") else custom_script + "\n"
            lines.append(f"cat > {_word(script_arg, workdir)} <<'{marker}'\n{body}{marker}")
    words = [
        f'{key}="${key}"' if value is None else f"{key}={shlex.quote(value)}" for key, value in env.items()
    ]
    words += [_word(arg, workdir) for arg in argv]
    lines.append(" ".join(words))
    return "\n".join(lines)
