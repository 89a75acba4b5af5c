"""Data sets: an engine's initialisation of a database (``pgbench -i`` at a scale, ``sysbench
prepare`` of tables × rows), queued, executed with live progress read by the engine's init reader."""

from __future__ import annotations

import contextlib
import json
import logging
import time
import traceback
import uuid

from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, DataSet, InvalidTransition, JobStatus, RunStatus
from benchmarks.services.enqueue import INIT_TASK, send_job
from benchmarks.services.failure import NOT_STARTED
from benchmarks.services.targets import ResolvedTarget, require_database, require_serving, resolve_target
from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError, message_to_json

log = logging.getLogger(__name__)


def latest_dataset(cluster: Cluster, database: str, engine: str = engines.PGBENCH) -> DataSet | None:
    """The newest usable data set of ``engine`` in ``database``."""
    return (
        DataSet.objects.filter(cluster=cluster, database=database, engine=engine, status=JobStatus.SUCCEEDED)
        .order_by("-finished_at")
        .first()
    )


def init_dataset(
    cluster: Cluster,
    database: str,
    scale: int | None = None,
    init_steps: str | None = None,
    foreign_keys: bool = False,
    *,
    engine: str = engines.PGBENCH,
    tables: int | None = None,
    table_size: int | None = None,
    enqueue: bool = True,
) -> DataSet:
    """Queue ``pgbench -i`` of ``database`` at ``scale``, or ``sysbench prepare`` of ``tables``
    tables of ``table_size`` rows (``engine="sysbench"``)."""
    require_serving(cluster)
    require_database(cluster, database)
    tool = engines.engine_for(engine)
    if tool is None:
        unknown = engines.unknown(engine)
        raise ServiceError(
            unknown.template, field="engine", code="dataset.engine_unknown", params=unknown.params
        )
    spec, found = tool.dataset_spec(
        engines.DatasetSpec(scale, init_steps or None, foreign_keys, tables, table_size)
    )
    if found:
        raise ServiceError.joined([message for _f, message in found], field=found[0][0])
    _refuse_while_a_run_is_going(cluster, database)
    if DataSet.objects.filter(
        cluster=cluster, database=database, status__in=[JobStatus.QUEUED, JobStatus.RUNNING]
    ).exists():
        raise ServiceError(
            N_("This database is already being initialised."),
            field="database",
            code="dataset.init_in_progress",
            params={},
        )
    dataset = DataSet.objects.create(
        cluster=cluster,
        database=database,
        engine=engine,
        scale=spec.scale,
        tables=spec.tables,
        table_size=spec.table_size,
        init_steps=spec.init_steps or "",
        foreign_keys=spec.foreign_keys,
        progress_message=_("Queued"),
    )
    if enqueue:
        try:
            send_job(INIT_TASK, str(dataset.pk), dataset.cluster, time_limit=6 * 3600)
        except ServiceError:
            dataset.delete()
            raise
    return dataset


def execute_init(dataset_id: uuid.UUID | str) -> DataSet:
    """Run ``pgbench -i`` (or ``sysbench prepare``) of a queued data set here and now, with a live
    progress figure."""
    dataset = DataSet.objects.get(pk=dataset_id)
    try:
        dataset.mark_running()
    except InvalidTransition:
        return dataset
    try:
        _execute_init(dataset)
    except Exception:
        log.exception("data set %s crashed", dataset.pk)
        with contextlib.suppress(InvalidTransition):
            dataset.error(traceback.format_exc())
    dataset.refresh_from_db()
    return dataset


def dataset_spec(dataset: DataSet) -> engines.DatasetSpec:
    """What a data set row is made of, as its engine reads it."""
    return dataset.spec


def _init_env(target: ResolvedTarget) -> dict[str, str]:
    return cmd.build_env(
        target.password, target.connection.sslmode, base=runner.base_env(), application_name="pgpanel-init"
    )


def _execute_init(dataset: DataSet) -> None:
    """The tool's run with a progress figure written every half second, then the outcome."""
    cluster = dataset.cluster
    try:
        target = resolve_target(cluster, pool=None, database=dataset.database, user=None)
    except ServiceError as exc:
        dataset.fail(exc.message)
        return
    tool = engines.ENGINES[dataset.engine]
    spec = dataset_spec(dataset)
    progress = tool.init_reader(spec)
    args = tool.init_args(runner.program_path(tool.name, cluster.version), target.connection, spec)
    env = _init_env(target)
    started = time.monotonic()
    try:
        proc = runner.LoadProcess(args, env, join=runner.client_cgroup().procs_files)
    except runner.RunnerError as exc:
        log.warning("data set %s did not start: %s", dataset.pk, exc)  # a path: the log's, not the page's
        dataset.fail(_(NOT_STARTED) % {"tool": tool.init_command})
        return
    DataSet.objects.filter(pk=dataset.pk).update(
        pgbench_pid=proc.pid, command_display=cmd.display_command(args, env, program=tool.program)
    )
    last_write = 0.0
    try:
        while not proc.done:
            line = proc.next_line(0.5)
            if line is not None:
                progress.feed(line.stream, line.text)
            now = time.monotonic()
            if now - last_write >= 0.5:
                last_write = now
                DataSet.objects.filter(pk=dataset.pk, status=JobStatus.RUNNING).update(
                    progress=progress.percent,
                    progress_message=_stored(progress.message),
                    heartbeat_at=timezone.now(),
                )
    except BaseException:
        proc.stop()
        raise
    code = proc.wait(10)
    duration = time.monotonic() - started
    if code != 0:
        dataset.fail(
            progress.first_error
            or _("%(command)s exited with code %(c)s") % {"command": tool.init_command, "c": code}
        )
        return
    size = _dataset_size(cluster, dataset.database, prefix=tool.table_prefix)
    dataset.succeed(size_bytes=size, duration_s=round(duration, 2))


def _dataset_size(cluster: Cluster, database: str, prefix: str) -> int | None:
    try:
        # The tenant's database: the monitor role, not the superuser (issue 10, row 9), and every
        # function and operator named with its schema.
        with dbconn.monitor_connection(cluster, dbname=database) as conn:
            row = conn.execute(
                "SELECT pg_catalog.sum(pg_catalog.pg_total_relation_size(c.oid))::bigint "
                "FROM pg_catalog.pg_class c "
                "WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}') "
                "AND pg_catalog.starts_with(c.relname, %s)",
                (prefix,),
            ).fetchone()
    except dbconn.DatabaseError:
        return None
    return int(row[0]) if row and row[0] is not None else None


CLEANUP_TIMEOUT_S = 120


@on_node(timeout=CLEANUP_TIMEOUT_S + 30)
def cleanup_dataset(cluster: Cluster, database: str, engine: str = engines.SYSBENCH) -> int:
    """The engine's cleanup (``sysbench cleanup``): drop its tables in ``database`` (as many as its
    largest data set made) and forget its data sets there; returns how many were forgotten."""
    require_serving(cluster)
    tool = engines.engine_for(engine)
    datasets = DataSet.objects.filter(cluster=cluster, database=database, engine=engine)
    if datasets.filter(status__in=[JobStatus.QUEUED, JobStatus.RUNNING]).exists():
        raise ServiceError(
            N_("This database is being prepared; wait for it."),
            field="database",
            code="dataset.prepare_in_progress",
            params={},
        )
    _refuse_while_a_run_is_going(cluster, database)
    tables = max((dataset.tables or 0 for dataset in datasets), default=0)
    target = resolve_target(cluster, pool=None, database=database, user=None)
    args = None
    if tool is not None and tables:
        args = tool.cleanup_args(runner.program_path(engine, cluster.version), target.connection, tables)
    if tool is None or args is None:
        raise ServiceError(
            N_("No %(tool)s data set to drop in the database “%(db)s”."),
            field="database",
            code="dataset.cleanup_missing",
            params={"tool": engine, "db": database},
        )
    try:
        proc = runner.LoadProcess(args, _init_env(target), join=runner.client_cgroup().procs_files)
    except runner.RunnerError as exc:
        raise ServiceError(
            N_("%(tool)s could not start: %(reason)s"),
            code="dataset.cleanup_failed",
            params={"tool": engine, "reason": exc},
        ) from None
    reader = tool.init_reader(engines.DatasetSpec(tables=tables))
    deadline = time.monotonic() + CLEANUP_TIMEOUT_S
    while not proc.done and time.monotonic() < deadline:
        line = proc.next_line(0.5)
        if line is not None:
            reader.feed(line.stream, line.text)
    code = proc.wait(5)
    if code is None:
        proc.stop()
        raise ServiceError(
            N_("%(tool)s cleanup did not finish within %(s)s s."),
            code="dataset.cleanup_timeout",
            params={"tool": engine, "s": CLEANUP_TIMEOUT_S},
        )
    if code != 0:
        if reader.first_error:  # the tool's own words
            raise ServiceError(reader.first_error, code="dataset.cleanup_failed")
        raise ServiceError(
            N_("%(tool)s cleanup exited with code %(c)s"),
            code="dataset.cleanup_failed",
            params={"tool": engine, "c": code},
        )
    forgotten, _by_model = datasets.delete()
    return forgotten


def _refuse_while_a_run_is_going(cluster: Cluster, database: str) -> None:
    # Making or dropping tables under a running benchmark would break it, or skew what it measures.
    if BenchmarkRun.objects.filter(cluster=cluster, database=database, status=RunStatus.RUNNING).exists():
        raise ServiceError(
            N_("A benchmark is running on this database; wait for it or cancel it."),
            field="database",
            code="dataset.run_in_progress",
            params={},
        )


def _stored(message: str | Message) -> str:
    """A progress line kept to be put into words where it is read (``DataSet.progress_shown``):
    a Message as its JSON, a tool's own line as it is."""
    if isinstance(message, Message):
        kept = json.dumps(message_to_json(message), ensure_ascii=False)
        if len(kept) <= 200:
            return kept
    return str(message)[:200]
