"""Validating and recording runs (a sweep's too: see ``sweeps``), their warnings, and cancelling a run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Unpack

from django.utils import translation

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_check import check_custom_script
from benchmarks.lib.pgbench_script_rules import shell_commands
from benchmarks.models import BenchmarkRun, InvalidTransition, RunStatus, Sweep
from benchmarks.services.config import HOSTNAME, SCRIPT_FILE, percentile_budget
from benchmarks.services.datasets import dataset_spec, latest_dataset
from benchmarks.services.enqueue import enqueue_run, kick_next
from benchmarks.services.room import require_room
from benchmarks.services.targets import ResolvedTarget, Where, require_serving, resolve_target
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError, Term, message_to_json


def _with_script(options: cmd.RunOptions, custom_script: str | None) -> cmd.RunOptions:
    if custom_script is None:
        return options
    return replace(options, builtin=None, custom_script_path=SCRIPT_FILE)


def refuse_shell_commands(custom_script: str) -> None:
    """A custom script only talks to the database: ``\\shell`` and ``\\setshell`` would run a
    program on this machine. A ServiceError on the script field names each such line."""
    found: dict[int, str] = {}
    for command in shell_commands(custom_script):
        found.setdefault(command.line, command.name)
    if found:
        sentence = N_(
            "Line %(line)s: \\%(command)s runs a program on the server; custom scripts may only talk to "
            "the database."
        )
        raise ServiceError.joined(
            [Message(sentence, "run.script_shell", line=line, command=name) for line, name in found.items()],
            field="custom_script",
        )


def _target_database(target: ResolvedTarget) -> str:
    return target.pool.database if target.pool else target.connection.dbname


def dataset_options(cluster: Cluster, target: ResolvedTarget, options: cmd.RunOptions) -> cmd.RunOptions:
    """A run made whole for its target, as its engine says: through a pool (sysbench's prepared
    statements off through transaction and statement pools), and its shape from the database's data
    set of that engine when the engine wants one (sysbench's tables and rows, unless given)."""
    engine = engines.engine_for(options.engine)
    if engine is None:
        return options  # engines.problems names it
    options = engine.for_target(options, target.pool.mode if target.pool else None)
    if not engine.wants_dataset(options):
        return options
    database = _target_database(target)
    dataset = latest_dataset(cluster, database, engine.name)
    if dataset is None:
        missing = engine.missing_dataset(database)
        raise ServiceError(missing.template, field="database", code=missing.code, params=missing.params)
    return engine.with_dataset(options, dataset_spec(dataset))


def validate_run(
    cluster: Cluster, *, options: cmd.RunOptions, custom_script: str | None = None, **where: Unpack[Where]
) -> ResolvedTarget:
    """Every blocking check of a launch; raises ServiceError naming the form field."""
    engine = engines.engine_for(options.engine)
    refusal = engine.custom_script_refusal() if engine is not None and custom_script is not None else None
    if refusal is not None:
        raise ServiceError(refusal.template, field="script", code=refusal.code, params=refusal.params)
    if custom_script is not None:
        refuse_shell_commands(custom_script)
    require_serving(cluster)
    target = resolve_target(cluster, **where)
    options = dataset_options(cluster, target, _with_script(options, custom_script))
    found = engines.problems(options)
    if found:
        raise ServiceError.joined([message for _field, message in found], field=found[0][0])
    if custom_script is not None:
        result = check_custom_script(
            runner.pgbench_path(cluster.version),
            custom_script,
            probe=runner.probe,
            query_mode=options.query_mode,
        )
        if not result.ok:
            # pgbench's own words (in English, as pgbench writes them).
            raise ServiceError(result.message, field="custom_script", code="run.script_refused")
    return target


def _warnings_for(target: ResolvedTarget, cluster: Cluster, options: cmd.RunOptions) -> list[Message]:
    engine = engines.engine_for(options.engine)
    if engine is None:
        return []
    dataset = latest_dataset(cluster, _target_database(target), engine.name)
    context = engines.LaunchContext(
        scale=dataset.scale if dataset else None,
        target_max_connections=target.max_connections,
        pool_mode=target.pool.mode if target.pool else None,
        pool_size=target.pool.size if target.pool else None,
    )
    return engine.warnings(options, context)


@on_node(timeout=30)
def preview_warnings(
    cluster: Cluster, *, options: cmd.RunOptions, custom_script: str | None = None, **where: Unpack[Where]
) -> Sequence[str | Message]:
    """Non-blocking warnings to show before launch (an empty list when the target is unknown)."""
    try:
        target = resolve_target(cluster, **where)
    except ServiceError:
        return []
    try:
        options = dataset_options(cluster, target, options)
    except ServiceError as exc:
        return [exc.message]
    return _warnings_for(target, cluster, _with_script(options, custom_script))


def _recent_tps(cluster: Cluster, engine: str) -> float | None:
    for summary in (
        # The same engine's: a sysbench transaction is some twenty queries, its TPS far lower.
        BenchmarkRun.objects.filter(cluster=cluster, status=RunStatus.SUCCEEDED, engine=engine)
        .order_by("-finished_at")
        .values_list("summary", flat=True)[:1]
    ):
        if summary and summary.get("tps"):
            return float(summary["tps"])
    return None


def choose_sampling_rate(cluster: Cluster, options: cmd.RunOptions) -> float:
    """Log every transaction unless the expected rate (--rate, else the cluster's last run, else a
    guess for an unthrottled run) passes the reader's budget; then sample down to it."""
    expected = options.rate or _recent_tps(cluster, options.engine) or 5000.0
    rate = min(1.0, percentile_budget() / expected)
    return 1.0 if rate >= 1.0 else max(0.001, float(f"{rate:.2g}"))


def _new_run(
    cluster: Cluster,
    target: ResolvedTarget,
    options: cmd.RunOptions,
    custom_script: str | None,
    *,
    sweep: Sweep | None = None,
    sweep_index: int = 0,
    label: str = "",
    percentiles: bool = True,
    foreground: bool = False,
) -> BenchmarkRun:
    options = dataset_options(cluster, target, _with_script(options, custom_script))
    engine = engines.ENGINES[options.engine]
    run = BenchmarkRun(
        foreground=foreground,
        engine=options.engine,
        cluster=cluster,
        pool=target.pool,
        pool_name=target.pool.name if target.pool else "",
        database=target.pool.database if target.pool else target.connection.dbname,
        user=target.connection.user,
        sweep=sweep,
        sweep_index=sweep_index,
        label=label,
        options=options.to_json(),
        custom_script=custom_script or "",
        clients=options.clients,
        threads=options.threads,
        duration_s=options.duration_s,
        transactions=options.transactions,
        script=options.script,
        query_mode=options.query_mode,
        warnings=[message_to_json(warning) for warning in _warnings_for(target, cluster, options)],
        # sysbench keeps no transaction log: its percentiles come from its own lines and histogram.
        percentile_sampling_rate=choose_sampling_rate(cluster, options)
        if percentiles and engine.logs_transactions
        else None,
    )
    env = engine.env(target.password, target.connection.sslmode, base={}, application_name=None)
    args = engine.run_args(options.engine, target.connection, options)
    run.command_display = cmd.display_command(args, env, program=options.engine)
    run.save()
    return run


@on_node(timeout=60)
def launch_run(
    cluster: Cluster,
    *,
    options: cmd.RunOptions,
    custom_script: str | None = None,
    label: str = "",
    percentiles: bool = True,
    enqueue: bool = True,
    **where: Unpack[Where],
) -> BenchmarkRun:
    """Validate, record a queued run and hand it to a worker (``enqueue=False``: the caller runs it
    with :func:`execute_run`). The broker being down is a ServiceError and leaves no row behind."""
    target = validate_run(cluster, options=options, custom_script=custom_script, **where)
    require_room(cluster, target, options.clients)
    run = _new_run(
        cluster, target, options, custom_script, label=label, percentiles=percentiles, foreground=not enqueue
    )
    if enqueue:
        try:
            enqueue_run(run)
        except ServiceError:
            run.delete()
            raise
    return run


@on_node(timeout=30)
def cancel_run(run: BenchmarkRun) -> BenchmarkRun:
    """Stop a queued or running run now; pgbench's process group is stopped within 2 s and the
    samples so far are kept."""
    try:
        run.cancel()
    except InvalidTransition:
        run.refresh_from_db()
        with translation.override("en"):  # the label's msgid, translated where the error is read
            status = Term(str(RunStatus(run.status).label))
        raise ServiceError(
            N_("The run is “%(status)s”; only a queued or running run can be cancelled."),
            code="run.not_cancellable",
            params={"status": status},
        ) from None
    run.refresh_from_db()
    if run.worker_hostname in ("", HOSTNAME):
        runner.kill_group(run.pgbench_pid, grace_s=1.5)
    # The executor also sees the status within a tick and stops its pgbench wherever it runs.
    kick_next(run.cluster_id)
    return run
