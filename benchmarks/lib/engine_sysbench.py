"""sysbench's engine (pure, no Django): its rules, argument lists, and readers of its output.

sysbench says everything on stdout (see :mod:`benchmarks.lib.sysbench_output`): each interval
line is a sample (its latency percentile is the sample's p95, its queries per second the sample's
qps), each ``FATAL:`` line an error, and the final report the summary, with the run's p50, p95 and
p99 read off its latency histogram. ``prepare`` makes its tables one after the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from benchmarks.lib import sysbench_command
from benchmarks.lib.engine_base import (
    COMPLETED_WITH_ERRORS,
    RUNNING,
    SUCCEEDED,
    BaseEngine,
    DatasetSpec,
    LaunchContext,
    Outcome,
    Sample,
)
from benchmarks.lib.pgbench_output import CLIENT_ABORTED, FATAL_KINDS, ErrorLine, ProgressSample
from benchmarks.lib.run_options import ConnectionTarget, RunOptions
from benchmarks.lib.sysbench_output import (
    SysbenchParser,
    classify_exit,
    parse_error_line,
    parse_init_line,
    parse_report,
)
from panel.core.errors import N_, Message

SYSBENCH = sysbench_command.SYSBENCH

# sysbench's own words where they differ from pgbench's: it exits 0 or 1 (an aborted client stops it).
MEANINGS = {
    RUNNING: N_("sysbench is running."),
    SUCCEEDED: N_("sysbench ran to the end (exit code 0)."),
    COMPLETED_WITH_ERRORS: N_("sysbench ran but stopped on an error after its report."),
}


class SysbenchReader:
    """A sysbench run's stdout: interval lines, errors, and the final report."""

    def __init__(self, options: RunOptions) -> None:
        self.parser = SysbenchParser(options.progress_interval_s)
        self.clients = options.clients

    def feed(self, stream: str, text: str) -> Sample | ErrorLine | None:
        event = self.parser.feed(text)
        if isinstance(event, ProgressSample):
            figures = self.parser.last_figures
            return Sample(
                elapsed_s=event.elapsed_s,
                tps=event.tps,
                retried=event.retried,
                qps=figures.qps if figures else None,
                p95_ms=figures.latency_pct_ms if figures else None,
                # The transactions the interval's percentile was taken over (all of them).
                percentile_count=round(event.tps * self.parser.interval_s),
            )
        return event if isinstance(event, ErrorLine) else None

    def finish(self, returncode: int) -> Outcome:
        report = parse_report(self.parser.report_text)
        status, reason = classify_exit(returncode, report, self.parser.errors, samples=self.parser.samples)
        summary = report.as_summary() if report is not None else None
        if summary is not None and summary.get("clients") is None:
            summary["clients"] = summary["threads"] = self.clients
        aborted = sum(1 for error in self.parser.errors if error.kind == CLIENT_ABORTED)
        return Outcome(status, reason, summary, aborted_clients=aborted)


class SysbenchPrepareReader:
    """``sysbench oltp_read_write prepare``: tables one after the other, each line on stdout; the
    progress is the share of tables whose rows are in."""

    def __init__(self, spec: DatasetSpec) -> None:
        self.tables = int(spec.tables or 0)
        self.done: set[int] = set()
        self.message: str | Message = ""
        self.first_error = ""

    def feed(self, stream: str, text: str) -> None:
        step = parse_init_line(text)
        if step is not None:
            self.message = step.message
            if step.rows_done:
                self.done.add(step.table)
            return
        error = parse_error_line(text)
        if error is not None and error.kind in FATAL_KINDS and not self.first_error:
            self.first_error = error.message

    @property
    def percent(self) -> int:
        return min(99, 100 * len(self.done) // max(1, self.tables))


class Sysbench(BaseEngine):
    name = SYSBENCH
    label = "sysbench"
    program = "sysbench"
    # (annotated as the Engine protocol declares them, so that Sysbench is one)
    scripts: Mapping[str, str] = {
        "oltp_read_write": N_("OLTP read/write"),
        "oltp_read_only": N_("OLTP read only"),
        "oltp_point_select": N_("OLTP point select"),
        "oltp_write_only": N_("OLTP write only"),
    }
    default_script = "oltp_read_write"
    extra_sample_fields: tuple[str, ...] = ("qps",)
    # Decided at launch (for_target); a -C posted for sysbench is refused by its rules, not cleared.
    form_values: Mapping[str, Any] = {"query_mode": "auto", "percentiles": False}
    dataset_fields = frozenset({"tables", "table_size"})
    query_mode_option = "--db-ps-mode"
    run_note: str | None = N_(
        "sysbench runs its OLTP scripts on the tables of a sysbench data set, one connection per client. "
        "Through a transaction pool it runs without prepared statements (--db-ps-mode=disable): "
        "PgBouncer 1.18 does not keep them across transactions."
    )
    sweep_note: str | None = N_(
        "sysbench runs its OLTP scripts on the tables of a sysbench data set in each target's database. "
        "Through a transaction pool it runs without prepared statements (--db-ps-mode=disable): "
        "PgBouncer 1.18 does not keep them across transactions."
    )
    init_command = "sysbench prepare"
    table_prefix = "sbtest"
    meanings = MEANINGS

    def dataset_spec(self, spec: DatasetSpec) -> tuple[DatasetSpec, list[tuple[str, Message]]]:
        spec = DatasetSpec(
            tables=spec.tables or sysbench_command.DEFAULT_TABLES,
            table_size=spec.table_size or sysbench_command.DEFAULT_TABLE_SIZE,
        )
        return spec, sysbench_command.prepare_problems(spec.tables or 0, spec.table_size or 0)

    def init_args(self, program: str, target: ConnectionTarget, spec: DatasetSpec) -> list[str]:
        return sysbench_command.build_prepare_args(
            program, target, int(spec.tables or 0), int(spec.table_size or 0)
        )

    def init_reader(self, spec: DatasetSpec) -> SysbenchPrepareReader:
        return SysbenchPrepareReader(spec)

    def cleanup_args(self, program: str, target: ConnectionTarget, tables: int) -> list[str] | None:
        return sysbench_command.build_prepare_args(program, target, tables, 0, command="cleanup")

    def wants_dataset(self, options: RunOptions) -> bool:
        return options.tables is None or options.table_size is None

    def with_dataset(self, options: RunOptions, dataset: DatasetSpec) -> RunOptions:
        return replace(
            options,
            tables=options.tables or dataset.tables,
            table_size=options.table_size or dataset.table_size,
        )

    def missing_dataset(self, database: str) -> Message:
        return Message(
            N_(
                "No sysbench data set in the database “%(db)s”: prepare one first (Data sets, engine "
                "sysbench), pgbench's tables are not sysbench's."
            ),
            "run.sysbench_data_missing",
            db=database,
        )

    def custom_script_refusal(self) -> Message | None:
        return Message(
            N_("sysbench runs its built-in OLTP scripts only; custom scripts are pgbench's."),
            "run.sysbench_custom_script",
        )

    def threads_for(self, clients: int, cpus: int | None, asked: int | None = None) -> int:
        return clients  # sysbench drives each client from a thread of its own

    def shape(self, spec: DatasetSpec) -> str:
        return f"sysbench {spec.tables} × {spec.table_size:,} rows"

    def for_target(self, options: RunOptions, pool_mode: str | None) -> RunOptions:
        # Prepared statements off through transaction and statement pools (PgBouncer 1.18).
        return replace(options, query_mode=sysbench_command.ps_mode_for(pool_mode))

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]:
        return sysbench_command.problems(options)

    def warnings(self, options: RunOptions, context: LaunchContext) -> list[Message]:
        return sysbench_command.warnings(
            options, target_max_connections=context.target_max_connections, pool_mode=context.pool_mode
        )

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
        return sysbench_command.build_run_args(program, target, options)

    def reader(self, options: RunOptions) -> SysbenchReader:
        return SysbenchReader(options)
