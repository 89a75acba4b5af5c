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
from dataclasses import dataclass

from benchmarks.lib.pgbench_output import ProgressShape
from benchmarks.lib.pgbench_txlog import TxLogFormat

BUILTIN_SCRIPTS = ("tpcb-like", "simple-update", "select-only")
# Built-in scripts that wrap their statements in BEGIN ... END.
TRANSACTIONAL_BUILTINS = frozenset({"tpcb-like", "simple-update"})
QUERY_MODES = ("simple", "extended", "prepared")
INIT_STEP_LETTERS = "dtgGvpf"
POOL_MODES = ("session", "transaction", "statement")
PASSWORD_PLACEHOLDER = "********"
SECRET_ENV_KEYS = frozenset({"PGPASSWORD"})
MAX_CLIENTS = 10_000
MAX_DURATION_S = 86_400
MAX_PROGRESS_S = 3_600
MAX_SCALE = 100_000
PGBOUNCER_PREPARED_SINCE = (1, 21)


@dataclass(frozen=True)
class ConnectionTarget:
    """Where pgbench connects: the server itself, or a PgBouncer pool (``dbname`` = pool name)."""

    host: str
    port: int
    user: str
    dbname: str
    sslmode: str = "require"


@dataclass(frozen=True)
class RunOptions:
    """One benchmark run. Exactly one of ``duration_s`` (-T) and ``transactions`` (-t, per client);
    at most one of ``builtin`` and ``custom_script_path`` (neither: the ``tpcb-like`` built-in)."""

    clients: int
    threads: int
    duration_s: int | None = None
    transactions: int | None = None
    progress_interval_s: int = 1
    builtin: str | None = None
    custom_script_path: str | None = None
    query_mode: str = "simple"
    rate: float | None = None  # --rate, transactions per second in total
    latency_limit_ms: float | None = None
    connect_per_transaction: bool = False  # -C
    max_tries: int | None = None  # None: pgbench's default of 1; 0: unlimited
    failures_detailed: bool = False
    log_transactions: bool = False  # -l
    log_prefix: str | None = None
    sampling_rate: float | None = None
    aggregate_interval_s: int | None = None
    report_per_command: bool = False  # -r
    no_vacuum: bool | None = None  # None: skip the vacuum for custom scripts only

    @property
    def script(self) -> str:
        """The built-in name, or ``custom``."""
        if self.custom_script_path is not None:
            return "custom"
        return self.builtin or "tpcb-like"

    @property
    def script_uses_transactions(self) -> bool | None:
        """Whether the script has BEGIN ... END; None for a custom script (unknown)."""
        if self.custom_script_path is not None:
            return None
        return self.script in TRANSACTIONAL_BUILTINS

    @property
    def skips_vacuum(self) -> bool:
        if self.no_vacuum is not None:
            return self.no_vacuum
        return self.custom_script_path is not None

    @property
    def progress_shape(self) -> ProgressShape:
        """What this run's progress lines carry (see :class:`ProgressShape`)."""
        return ProgressShape(
            lag=self.rate is not None,
            skipped=self.rate is not None and self.latency_limit_ms is not None,
            retries=self.max_tries is not None and self.max_tries != 1,
        )

    @property
    def txlog_format(self) -> TxLogFormat:
        return TxLogFormat.for_options(self.rate, self.max_tries)


@dataclass(frozen=True)
class InitOptions:
    """``pgbench -i``. ``init_steps`` None keeps pgbench's default (``dtgvp``)."""

    scale: int
    init_steps: str | None = None
    foreign_keys: bool = False
    unlogged_tables: bool = False


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


def default_threads(clients: int, cpu_count: int | None) -> int:
    """One thread per CPU, never more than clients; prefer a count that divides the clients evenly."""
    cap = max(1, min(clients, cpu_count or 1))
    for threads in range(cap, 0, -1):
        if clients % threads == 0:
            return threads if threads * 2 >= cap else cap
    return cap


def validate(options: RunOptions) -> list[str]:
    """Blocking errors, as sentences for the form; empty when pgbench will accept the options."""
    errors: list[str] = []
    if not 1 <= options.clients <= MAX_CLIENTS:
        errors.append(f"Clients must be between 1 and {MAX_CLIENTS:,}.")
    if options.threads < 1:
        errors.append("Threads must be at least 1.")
    elif options.threads > options.clients >= 1:
        errors.append(f"Threads ({options.threads}) cannot exceed clients ({options.clients}).")
    if (options.duration_s is None) == (options.transactions is None):
        errors.append("Give either a duration or a number of transactions per client, not both.")
    if options.duration_s is not None and not 1 <= options.duration_s <= MAX_DURATION_S:
        errors.append(f"Duration must be between 1 and {MAX_DURATION_S:,} seconds.")
    if options.transactions is not None and not 1 <= options.transactions <= 1_000_000_000:
        errors.append("Transactions per client must be between 1 and 1,000,000,000.")
    if not 1 <= options.progress_interval_s <= MAX_PROGRESS_S:
        errors.append(f"Progress interval must be between 1 and {MAX_PROGRESS_S:,} seconds.")
    if options.builtin is not None and options.custom_script_path is not None:
        errors.append("Choose a built-in script or a custom script, not both.")
    elif options.builtin is not None and options.builtin not in BUILTIN_SCRIPTS:
        errors.append(
            f"Unknown built-in script {options.builtin!r}: choose one of {', '.join(BUILTIN_SCRIPTS)}."
        )
    if options.custom_script_path is not None and not options.custom_script_path.strip():
        errors.append("The custom script path is empty.")
    if options.query_mode not in QUERY_MODES:
        errors.append(f"Unknown query mode {options.query_mode!r}: choose one of {', '.join(QUERY_MODES)}.")
    if options.rate is not None and not options.rate > 0:
        errors.append("Rate must be greater than 0 transactions per second.")
    if options.latency_limit_ms is not None and not options.latency_limit_ms > 0:
        errors.append("Latency limit must be greater than 0 ms.")
    if options.max_tries is not None:
        if options.max_tries < 0:
            errors.append("Maximum tries must be 0 (unlimited) or more.")
        elif options.max_tries == 0 and options.latency_limit_ms is None and options.duration_s is None:
            errors.append("Unlimited tries need a latency limit or a duration.")
    errors += _log_errors(options)
    return errors


def _log_errors(options: RunOptions) -> list[str]:
    errors: list[str] = []
    logging_options = (options.log_prefix, options.sampling_rate, options.aggregate_interval_s)
    if not options.log_transactions and any(value is not None for value in logging_options):
        errors.append("Log prefix, sampling rate and aggregate interval need the transaction log (-l).")
    if options.sampling_rate is not None and not 0 < options.sampling_rate <= 1:
        errors.append("Sampling rate must be greater than 0 and at most 1.")
    if options.sampling_rate is not None and options.aggregate_interval_s is not None:
        errors.append("Sampling and aggregation cannot be used together.")
    interval = options.aggregate_interval_s
    if interval is not None:
        if interval < 1:
            errors.append("Aggregate interval must be at least 1 second.")
        elif options.duration_s is not None and (
            interval > options.duration_s or options.duration_s % interval
        ):
            errors.append("The duration must be a multiple of the aggregate interval.")
    return errors


def validate_init(options: InitOptions) -> list[str]:
    """Blocking errors for ``pgbench -i``."""
    errors: list[str] = []
    if not 1 <= options.scale <= MAX_SCALE:
        errors.append(f"Scale must be between 1 and {MAX_SCALE:,}.")
    steps = options.init_steps
    if steps is not None:
        unknown = sorted({letter for letter in steps if letter not in INIT_STEP_LETTERS})
        if not steps:
            errors.append("Give at least one initialization step.")
        elif unknown:
            errors.append(
                f"Unknown initialization step {', '.join(map(repr, unknown))}: "
                f"allowed steps are {', '.join(INIT_STEP_LETTERS)}."
            )
        elif len(set(steps)) != len(steps):
            errors.append("Each initialization step may appear only once.")
        elif "g" in steps and "G" in steps:
            errors.append("Generate data client-side (g) or server-side (G), not both.")
    return errors


def _parse_version(version: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    if version is None or isinstance(version, tuple):
        return version
    numbers = re.findall(r"\d+", version)
    return tuple(int(number) for number in numbers[:3]) or None


def warnings(
    options: RunOptions,
    scale: int | None = None,
    target_max_connections: int | None = None,
    pool_mode: str | None = None,
    pgbouncer_version: str | tuple[int, ...] | None = None,
    script_uses_transactions: bool | None = None,
    *,
    pool_size: int | None = None,
) -> list[str]:
    """Non-blocking warnings about a run that will work badly; ``pool_mode`` None means direct."""
    found: list[str] = []
    clients = options.clients
    uses_transactions = (
        options.script_uses_transactions if script_uses_transactions is None else script_uses_transactions
    )
    if scale is not None and clients > scale and options.script == "tpcb-like":
        found.append(
            f"{clients} clients on a scale of {scale}: every TPC-B-like transaction updates one of "
            f"{scale} branch rows, so clients mostly wait for each other's row locks. "
            f"Initialise with a scale of at least {clients} to measure the server rather than lock contention."
        )
    if target_max_connections is not None and clients > target_max_connections:
        if pool_mode is None:
            found.append(
                f"{clients} clients but the server accepts at most {target_max_connections} connections "
                "for this user: pgbench will not start (connections refused). Use a connection pool or fewer clients."
            )
        else:
            found.append(
                f"{clients} clients but PgBouncer accepts at most {target_max_connections} client connections: "
                "the extra clients will be refused."
            )
    if pool_mode == "statement" and uses_transactions:
        found.append(
            f"Statement pools reject transaction blocks, and the {options.script} script uses BEGIN ... END: "
            "every client will abort ('transaction blocks not allowed in statement pooling mode'). "
            "Use select-only, a script without transactions, or a transaction pool."
        )
    if pool_mode == "session" and pool_size is not None and clients > pool_size:
        found.append(
            f"In session mode each client keeps a server connection for its whole session: "
            f"{clients - pool_size} of {clients} clients will wait for one of the {pool_size} and may be "
            "dropped (query_wait_timeout). Use a transaction pool to share connections."
        )
    version = _parse_version(pgbouncer_version)
    if (
        options.query_mode == "prepared"
        and pool_mode in ("transaction", "statement")
        and (version is None or version < PGBOUNCER_PREPARED_SINCE)
    ):
        shown = f"PgBouncer {'.'.join(map(str, version))}" if version else "PgBouncer before 1.21"
        found.append(
            f"{shown} does not track prepared statements in {pool_mode} pools: clients will fail with "
            "'prepared statement \"P_0\" does not exist'. Use the simple or extended query mode."
        )
    if options.threads > 1 and clients % options.threads:
        found.append(
            f"{clients} clients do not divide evenly among {options.threads} threads: "
            "some threads will drive more clients than others."
        )
    if options.duration_s is not None and options.progress_interval_s > options.duration_s:
        found.append("The progress interval is longer than the run: no progress will be reported.")
    return found
