"""Data sets: ``pgbench -i`` of a database at a scale, queued, executed with live progress."""

from __future__ import annotations

import contextlib
import logging
import time
import traceback
import uuid

from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks import runner
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_output import FATAL_KINDS, InitDone, InitPhase, InitProgress, StderrParser
from benchmarks.models import BenchmarkRun, DataSet, InvalidTransition, JobStatus, RunStatus
from benchmarks.services.enqueue import INIT_TASK, send_job
from benchmarks.services.targets import require_serving, resolve_target
from panel.clusters import dbconn, isolation
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError

log = logging.getLogger(__name__)


def latest_dataset(cluster: Cluster, database: str) -> DataSet | None:
    return (
        DataSet.objects.filter(cluster=cluster, database=database, status=JobStatus.SUCCEEDED)
        .order_by("-finished_at")
        .first()
    )


def init_dataset(
    cluster: Cluster,
    database: str,
    scale: int,
    init_steps: str | None = None,
    foreign_keys: bool = False,
    *,
    enqueue: bool = True,
) -> DataSet:
    """Queue ``pgbench -i`` of ``database`` at ``scale``."""
    require_serving(cluster)
    if not cluster.databases.filter(name=database).exists():
        raise ServiceError(
            _("No database named “%(name)s” on this cluster.") % {"name": database}, field="database"
        )
    errors = cmd.validate_init(cmd.InitOptions(scale, init_steps or None, foreign_keys))
    if errors:
        field = "scale" if errors[0].startswith("Scale") else "init_steps"
        raise ServiceError(" ".join(errors), field=field)
    if BenchmarkRun.objects.filter(cluster=cluster, database=database, status=RunStatus.RUNNING).exists():
        raise ServiceError(
            _("A benchmark is running on this database; wait for it or cancel it."), field="database"
        )
    if DataSet.objects.filter(
        cluster=cluster, database=database, status__in=[JobStatus.QUEUED, JobStatus.RUNNING]
    ).exists():
        raise ServiceError(_("This database is already being initialised."), field="database")
    dataset = DataSet.objects.create(
        cluster=cluster,
        database=database,
        scale=scale,
        init_steps=init_steps or "",
        foreign_keys=foreign_keys,
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
    """Run ``pgbench -i`` of a queued data set here and now, with a live progress figure."""
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


def _execute_init(dataset: DataSet) -> None:
    cluster = dataset.cluster
    try:
        target = resolve_target(cluster, pool=None, database=dataset.database, user=None)
    except ServiceError as exc:
        dataset.fail(exc.message)
        return
    options = cmd.InitOptions(dataset.scale, dataset.init_steps or None, dataset.foreign_keys)
    args = cmd.build_init_args(runner.pgbench_path(cluster.version), target.connection, options)
    env = cmd.build_env(
        target.password, target.connection.sslmode, base=runner.base_env(), application_name="pgpanel-init"
    )
    started = time.monotonic()
    try:
        proc = runner.PgbenchProcess(args, env, join=isolation.server_cgroup(cluster))
    except runner.RunnerError as exc:
        dataset.fail(str(exc))
        return
    DataSet.objects.filter(pk=dataset.pk).update(
        pgbench_pid=proc.pid, command_display=cmd.display_command(args, env, program="pgbench")
    )
    parser = StderrParser()
    last_write = 0.0
    percent, message = 0, ""
    try:
        while not proc.done:
            line = proc.next_line(0.5)
            if line is not None and line.stream == runner.STDERR:
                event = parser.feed(line.text)
                if isinstance(event, InitProgress):
                    percent = min(99, event.percent)
                    message = _("Generating data: %(p)s%%") % {"p": event.percent}
                elif isinstance(event, InitPhase):
                    message = event.message
                elif isinstance(event, InitDone):
                    percent = 99
            now = time.monotonic()
            if now - last_write >= 0.5:
                last_write = now
                DataSet.objects.filter(pk=dataset.pk, status=JobStatus.RUNNING).update(
                    progress=percent, progress_message=message[:200], heartbeat_at=timezone.now()
                )
    except BaseException:
        proc.stop()
        raise
    code = proc.wait(10)
    duration = time.monotonic() - started
    if code != 0:
        first = next((e for e in parser.errors if e.kind in FATAL_KINDS), None)
        dataset.fail(first.message if first else _("pgbench -i exited with code %(c)s") % {"c": code})
        return
    dataset.succeed(size_bytes=_dataset_size(cluster, dataset.database), duration_s=round(duration, 2))


def _dataset_size(cluster: Cluster, database: str) -> int | None:
    try:
        # The tenant's database: the monitor role, not the superuser (issue 10, row 9), and every
        # function and operator named with its schema.
        with dbconn.monitor_connection(cluster, dbname=database) as conn:
            row = conn.execute(
                "SELECT pg_catalog.sum(pg_catalog.pg_total_relation_size(c.oid))::bigint "
                "FROM pg_catalog.pg_class c "
                "WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}') "
                "AND pg_catalog.starts_with(c.relname, 'pgbench_')"
            ).fetchone()
    except dbconn.DatabaseError:
        return None
    return int(row[0]) if row and row[0] is not None else None
