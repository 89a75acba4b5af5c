"""pgbench's engine (pure, no Django): its rules, argument lists, and readers of its output.

pgbench writes its progress lines and errors on stderr and its summary on stdout; a run's
percentiles come from its transaction log (``-l``), which the services tail beside this reader.
``pgbench -i`` says on stderr the share of rows generated and the phase it is in.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import replace

from benchmarks.lib import pgbench_command, run_problems, run_warnings
from benchmarks.lib.engine_base import (
    RUNNING,
    STDERR,
    STDOUT,
    BaseEngine,
    DatasetSpec,
    LaunchContext,
    Outcome,
    Sample,
)
from benchmarks.lib.pgbench_output import (
    COMPLETED_WITH_ERRORS,
    CONNECTION_FAILED,
    FAILED,
    FATAL_KINDS,
    SUCCEEDED,
    ErrorLine,
    InitDone,
    InitPhase,
    InitProgress,
    ProgressSample,
    StderrParser,
    classify_exit,
    parse_summary,
)
from benchmarks.lib.run_options import ConnectionTarget, InitOptions, RunOptions
from panel.core.errors import N_, Message

PGBENCH = "pgbench"

# pgbench's exit codes, in words (the model's statuses for the others are the shared ones).
MEANINGS = {
    RUNNING: N_("pgbench is running."),
    SUCCEEDED: N_("pgbench ran to the end (exit code 0)."),
    COMPLETED_WITH_ERRORS: N_("pgbench ran but some clients aborted (exit code 2)."),
}

# What the run form asks only of pgbench (the page hides them for the other engines).
FORM_FIELDS = frozenset(
    {"threads", "query_mode", "latency_limit", "max_tries", "percentiles", "connect", "custom_script"}
)


class PgbenchReader:
    """A pgbench run's streams: progress and errors on stderr, the summary on stdout."""

    def __init__(self, options: RunOptions) -> None:
        self.parser = StderrParser(options.progress_shape)
        self.stdout: list[str] = []

    def feed(self, stream: str, text: str) -> Sample | ErrorLine | None:
        if stream == STDOUT:
            self.stdout.append(text)
            return None
        event = self.parser.feed(text)
        if isinstance(event, ProgressSample):
            return Sample(**dataclasses.asdict(event))
        return event if isinstance(event, ErrorLine) else None

    def finish(self, returncode: int) -> Outcome:
        parser = self.parser
        summary = parse_summary("".join(self.stdout), run_aborted=parser.run_aborted)
        reason: str | Message
        status, reason = classify_exit(returncode, summary, parser.errors)
        refused = next((e for e in parser.errors if e.kind == CONNECTION_FAILED), None)
        if status == FAILED and returncode < 0 and refused is not None:
            # pgbench 15 can die of a signal instead of exiting 1 when connections are refused.
            reason = Message(N_("could not start: %(m)s"), "run.could_not_start", m=refused.message)
        return Outcome(
            status,
            reason,
            json.loads(json.dumps(dataclasses.asdict(summary))) if summary else None,
            aborted_clients=len(parser.aborted_clients),
        )


class PgbenchInitReader:
    """``pgbench -i``: its stderr says the share of rows generated and the phase it is in."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.parser = StderrParser()
        self.percent = 0
        self.message: str | Message = ""

    def feed(self, stream: str, text: str) -> None:
        if stream != STDERR:
            return
        event = self.parser.feed(text)
        if isinstance(event, InitProgress):
            self.percent = min(99, event.percent)
            self.message = Message(N_("Generating data: %(p)s%%"), "dataset.generating", p=event.percent)
        elif isinstance(event, InitPhase):
            self.message = event.message
        elif isinstance(event, InitDone):
            self.percent = 99

    @property
    def first_error(self) -> str:
        first = next((e for e in self.parser.errors if e.kind in FATAL_KINDS), None)
        return first.message if first else ""


class Pgbench(BaseEngine):
    name = PGBENCH
    label = "pgbench"
    logs_transactions = True
    program = "pgbench"
    server_bindir = True
    scripts: Mapping[str, str] = {  # as the Engine protocol declares it
        "tpcb-like": N_("TPC-B-like (read/write, the default)"),
        "simple-update": N_("Simple update"),
        "select-only": N_("Select only"),
    }
    default_script = "tpcb-like"
    form_fields = FORM_FIELDS
    dataset_fields = frozenset({"scale", "init_steps", "foreign_keys"})
    init_command = "pgbench -i"
    table_prefix = "pgbench_"
    meanings = MEANINGS

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]:
        spec = replace(spec, init_steps=spec.init_steps or None, tables=None, table_size=None)
        if spec.scale is None:
            return spec, [("scale", Message(N_("Give a scale factor."), "dataset.scale_missing"))]
        return spec, run_problems.init_problems(self._init_options(spec))

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]:
        return pgbench_command.build_init_args(program, target, self._init_options(spec))

    def init_reader(self, spec: DatasetSpec) -> PgbenchInitReader:
        return PgbenchInitReader(spec)

    @staticmethod
    def _init_options(spec: DatasetSpec) -> InitOptions:
        return InitOptions(spec.scale, spec.init_steps or None, spec.foreign_keys)  # type: ignore[arg-type]

    def custom_script_refusal(self) -> Message | None:
        return None

    def shape(self, spec: DatasetSpec) -> str:
        return f"at scale {spec.scale}"

    def short_shape(self, spec: DatasetSpec) -> str:
        return f"scale {spec.scale}"

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]:
        return run_problems.problems(options)

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]:
        return run_warnings.warnings(
            options,
            scale=context.scale,
            target_max_connections=context.target_max_connections,
            pool_mode=context.pool_mode,
            pgbouncer_version=context.pgbouncer_version,
            pool_size=context.pool_size,
        )

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
        return pgbench_command.build_run_args(program, target, options)

    def reader(self, options: RunOptions) -> PgbenchReader:
        return PgbenchReader(options)
