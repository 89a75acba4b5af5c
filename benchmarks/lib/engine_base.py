"""What every load generator's engine is (pure, no Django): the protocol and the types it speaks.

An engine module (``engine_pgbench``, ``engine_sysbench``, or one of your own named in
``PANEL_BENCH_ENGINES``) defines an :class:`Engine` and registers it in
:mod:`benchmarks.lib.engines`. The services never branch on a tool's name: they ask the engine for
its rules, its argument list, its environment, and a :class:`OutputReader` (a run's output →
:class:`Sample`, :class:`~benchmarks.lib.pgbench_output.ErrorLine`, and at the end an
:class:`Outcome`) or an :class:`InitReader` (a data set's initialisation → a percentage, a
message, its first error), and store what those return.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchmarks.lib import pgbench_command
from benchmarks.lib.pgbench_output import ErrorLine
from benchmarks.lib.run_options import ConnectionTarget, RunOptions, default_threads
from panel.core.errors import N_, Message

# A run's states and outcomes, as the model's statuses spell them.
RUNNING = "running"
SUCCEEDED = "succeeded"
COMPLETED_WITH_ERRORS = "completed_with_errors"
FAILED = "failed"

STDOUT = "stdout"
STDERR = "stderr"


@dataclass(frozen=True)
class DatasetSpec:
    """What a data set is made of, as its row stores it (None: not this engine's): a scale
    (pgbench's shape) or tables × rows (sysbench's); an engine of your own takes one of the two."""

    scale: int | None = None
    init_steps: str | None = None
    foreign_keys: bool = False
    tables: int | None = None
    table_size: int | None = None


@dataclass(frozen=True)
class LaunchContext:
    """What the advice before a launch knows of the target (None: not known)."""

    scale: int | None = None  # the data set's (pgbench)
    target_max_connections: int | None = None
    pool_mode: str | None = None  # None: directly to the server
    pool_size: int | None = None
    pgbouncer_version: str | None = None


@dataclass(frozen=True)
class FieldSpec:
    """A field of an engine's own on the run form and ``bench run --set NAME=VALUE`` (the form
    builds it; its value reaches the engine in ``RunOptions.extra``)."""

    name: str
    label: str  # marked with N_ by the engine: the form translates it
    kind: str = "text"  # text, int, float, bool or choice
    initial: Any = None
    required: bool = False
    help: str = ""
    min_value: float | None = None
    max_value: float | None = None
    choices: tuple[tuple[str, str], ...] = ()

    def parse(self, raw: str) -> Any:
        """A value from the command line; ValueError when it is not one."""
        if self.kind == "int":
            return int(raw)
        if self.kind == "float":
            return float(raw)
        if self.kind == "bool":
            if raw.lower() not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(f"not a yes or no: {raw!r}")
            return raw.lower() in {"1", "true", "yes", "on"}
        if self.kind == "choice" and raw not in {value for value, _label in self.choices}:
            raise ValueError(f"not one of {', '.join(value for value, _label in self.choices)}")
        return raw


@dataclass(frozen=True)
class Sample:
    """One interval of a run as its tool reported it: what a run's sample row stores (None: the
    tool does not say)."""

    elapsed_s: float
    tps: float
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    failed: int | None = None
    lag_ms: float | None = None
    skipped: int | None = None
    retried: int | None = None
    retries: int | None = None
    qps: float | None = None
    p95_ms: float | None = None
    percentile_count: int | None = None  # the transactions ``p95_ms`` was taken over


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as its tool's exit, final report and errors say."""

    status: str  # SUCCEEDED, COMPLETED_WITH_ERRORS or FAILED
    reason: str | Message
    summary: dict[str, Any] | None  # JSON: what the run page, the export and comparisons read
    aborted_clients: int = 0
    errors: list[ErrorLine] = field(default_factory=list)


class OutputReader(Protocol):
    """Reads one run's output as it comes; nothing here touches a row."""

    def feed(self, stream: str, text: str) -> Sample | ErrorLine | None: ...

    def finish(self, returncode: int) -> Outcome: ...


class InitReader(Protocol):
    """Reads a data set's initialisation as it comes."""

    message: str | Message

    # Read only: each an attribute or a property of the reader.
    @property
    def percent(self) -> int: ...

    @property
    def first_error(self) -> str: ...

    def feed(self, stream: str, text: str) -> None: ...


class Engine(Protocol):
    """A load generator the panel can run."""

    name: str
    #: Its name on pages and in the engine choice.
    label: str
    #: Percentiles from the tool's own transaction log (pgbench -l); otherwise from its lines.
    logs_transactions: bool
    #: The executable's name; ``server_bindir``: the one of the cluster's version when installed.
    program: str
    server_bindir: bool
    #: Its built-in scripts (name → label) and the one a run gets when none is chosen.
    scripts: Mapping[str, str]
    default_script: str
    #: Sample fields beyond the shared ones (sysbench's queries per second).
    extra_sample_fields: tuple[str, ...]
    #: The run form's fields that mean something to this engine (the page hides the others), and
    #: what the form takes for the hidden ones.
    form_fields: frozenset[str]
    form_values: Mapping[str, Any]
    #: The data set form's fields it asks for (a scale, or tables and rows), and what the run and
    #: sweep forms say under its script (None: nothing).
    dataset_fields: frozenset[str]
    #: Fields of its own beyond the shared ones (built by the run form, ``bench run --set``).
    extra_fields: tuple[FieldSpec, ...]
    #: The tool's option that a run's ``query_mode`` holds, shown on the run page ("" : pgbench's -M).
    query_mode_option: str
    run_note: str | None
    sweep_note: str | None
    #: How its initialisation is named (``pgbench -i``) and the prefix of the tables it makes.
    init_command: str
    table_prefix: str

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]: ...

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]: ...

    def init_reader(self, spec: DatasetSpec) -> InitReader: ...

    def cleanup_args(self, program: str, target: ConnectionTarget, tables: int) -> list[str] | None: ...

    def wants_dataset(self, options: RunOptions) -> bool: ...

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions: ...

    def missing_dataset(self, database: str) -> Message: ...

    def custom_script_refusal(self) -> Message | None: ...

    def threads_for(self, clients: int, cpus: int | None, asked: int | None = None) -> int: ...

    def shape(self, spec: DatasetSpec) -> str: ...

    def short_shape(self, spec: DatasetSpec) -> str: ...

    def status_meaning(self, status: str) -> Message | None: ...

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions: ...

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]: ...

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]: ...

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]: ...

    def reader(self, options: RunOptions) -> OutputReader: ...

    def env(
        self,
        password: str | None,
        sslmode: str | None,
        *,
        base: Mapping[str, str],
        application_name: str | None,
    ) -> dict[str, str]: ...


class BaseEngine:
    """What most engines share, so that one of your own writes only what differs: libpq's
    environment, no data set of its own, no cleanup, one thread per CPU, no custom scripts."""

    logs_transactions = False
    server_bindir = False
    extra_sample_fields: tuple[str, ...] = ()
    form_fields: frozenset[str] = frozenset()
    form_values: Mapping[str, Any] = {"query_mode": "simple", "percentiles": False, "connect": False}
    dataset_fields: frozenset[str] = frozenset()
    extra_fields: tuple[FieldSpec, ...] = ()
    query_mode_option = ""
    run_note: str | None = None
    sweep_note: str | None = None
    init_command = ""
    table_prefix = ""
    #: Its own words for a run's statuses (its exit codes), where they differ from the shared ones.
    meanings: Mapping[str, str] = {}

    # Every engine reaches PostgreSQL through libpq: the password and TLS mode in its variables.
    env = staticmethod(pgbench_command.build_env)

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]:
        return spec, [("engine", Message(N_("This engine makes no data set."), "dataset.engine_none"))]

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]:
        raise NotImplementedError  # never asked: dataset_spec refuses

    def init_reader(self, spec: DatasetSpec) -> InitReader:
        raise NotImplementedError

    def cleanup_args(self, program: str, target: ConnectionTarget, tables: int) -> list[str] | None:
        return None

    def wants_dataset(self, options: RunOptions) -> bool:
        return False

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions:
        return options

    def missing_dataset(self, database: str) -> Message:
        raise NotImplementedError  # never asked: wants_dataset is False

    def custom_script_refusal(self) -> Message | None:
        return Message(N_("This engine runs its built-in scripts only."), "run.custom_script_refused")

    def threads_for(self, clients: int, cpus: int | None, asked: int | None = None) -> int:
        return asked or default_threads(clients, cpus)

    def shape(self, spec: DatasetSpec) -> str:
        return ""

    def short_shape(self, spec: DatasetSpec) -> str:
        return self.shape(spec)

    def status_meaning(self, status: str) -> Message | None:
        template = self.meanings.get(status)
        return Message(template) if template else None  # None: the shared words

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions:
        return options

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]:
        return []
