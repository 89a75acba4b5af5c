"""One function per user action on benchmarks, called by views, the ``bench`` command and tasks.

The queue: runs on one cluster execute one at a time, oldest first. A partial unique index
(``benchmarkrun_one_running_per_cluster``) makes the database refuse a second running run, so a
claim is a conditional update inside one transaction. A task whose run cannot start yet returns and
leaves it queued; whoever frees the cluster (a finishing run, a cancel, the reaper) enqueues the
next run in line, and the reaper re-enqueues a queue that stalled (a lost message).

Liveness: the process executing a run writes ``heartbeat_at`` every few seconds. The reaper (a beat
task every 15 s) fails a running run whose heartbeat is older than 45 s, or whose worker process on
this machine is gone, kills its pgbench process group and starts the next run.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import datetime as dt
import io
import json
import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks import runner
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_check import check_custom_script
from benchmarks.lib.pgbench_output import (
    CONNECTION_FAILED,
    DETAIL,
    FATAL_KINDS,
    IGNORED,
    WARNING,
    ErrorLine,
    InitDone,
    InitPhase,
    InitProgress,
    ProgressSample,
    StderrParser,
    classify_exit,
    parse_summary,
)
from benchmarks.lib.pgbench_txlog import TxLogTail, percentile
from benchmarks.models import (
    BenchmarkRun,
    DataSet,
    InvalidTransition,
    JobStatus,
    RunError,
    RunSample,
    RunStatus,
    Sweep,
)
from panel.clusters import dbconn
from panel.clusters.models import Cluster, DatabaseUser
from panel.clusters.services import ServiceError
from panel.pools.models import ConnectionPool

log = logging.getLogger(__name__)

RUN_TASK = "benchmarks.tasks.run_benchmark"
INIT_TASK = "benchmarks.tasks.init_dataset"
QUEUE = "benchmarks"
LOOPBACK = "127.0.0.1"
TICK_S = 0.25  # how often the executor checks for a cancel and reads the transaction log
SCRIPT_FILE = "custom.sql"
NOT_COUNTED = frozenset({IGNORED, WARNING, DETAIL})  # context, not errors of the run


def _setting(name: str, default: float) -> float:
    value = getattr(settings, name, default)
    if not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"settings.{name} must be a positive number, not {value!r}")
    return float(value)


def heartbeat_interval() -> float:
    return _setting("BENCHMARK_HEARTBEAT_SECONDS", 3)


def worker_lost_after() -> float:
    return _setting("BENCHMARK_WORKER_LOST_SECONDS", 45)


def requeue_after() -> float:
    return _setting("BENCHMARK_REQUEUE_SECONDS", 15)


def percentile_budget() -> float:
    """Logged transactions per second the percentile reader is sized for (sets the sampling rate)."""
    return _setting("BENCHMARK_PERCENTILE_TX_PER_SECOND", 2000)


def run_margin() -> float:
    """Seconds a run may take beyond its duration (connecting, vacuum, summary) before it is stopped."""
    return _setting("BENCHMARK_RUN_MARGIN_SECONDS", 120)


HOSTNAME = socket.gethostname()


# --- enqueueing --------------------------------------------------------------------------------


def _send(task_name: str, object_id: str, *, time_limit: float | None = None) -> None:
    """Send a task now; an unreachable broker becomes a ServiceError at once."""
    from panel.celery import app

    options: dict[str, Any] = {"queue": QUEUE}
    if time_limit is not None:
        options.update(soft_time_limit=int(time_limit), time_limit=int(time_limit) + 30)
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=0)
            app.send_task(task_name, args=[object_id], retry=False, connection=conn, **options)
    except Exception as exc:  # kombu raises several types for an unreachable broker
        log.warning("could not enqueue %s: %s", task_name, type(exc).__name__)
        raise ServiceError(
            _(
                "The task queue (Redis at %(url)s) is not reachable, so nothing was started. Try again when it is back."
            )
            % {"url": settings.REDIS_URL.split("@")[-1]}
        ) from None


def run_time_limit(run: BenchmarkRun) -> float:
    """The task's soft time limit: the run's own duration plus a margin (-t runs: the maximum)."""
    duration = run.duration_s if run.duration_s is not None else cmd.MAX_DURATION_S
    return duration + run_margin()


def _enqueue_run(run: BenchmarkRun) -> None:
    _send(RUN_TASK, str(run.pk), time_limit=run_time_limit(run))
    BenchmarkRun.objects.filter(pk=run.pk).update(enqueued_at=timezone.now())


def next_in_line(cluster_id: uuid.UUID | str) -> BenchmarkRun | None:
    """The queued run a worker should execute next on this cluster (foreground runs are not
    in the workers' queue: their own process runs them)."""
    return (
        BenchmarkRun.objects.filter(cluster_id=cluster_id, status=RunStatus.QUEUED, foreground=False)
        .order_by("created_at", "sweep_index")
        .first()
    )


def kick_next(cluster_id: uuid.UUID | str) -> BenchmarkRun | None:
    """Enqueue the next queued run of a cluster if none is running; a broker error is only logged
    (the reaper tries again)."""
    if BenchmarkRun.objects.filter(cluster_id=cluster_id, status=RunStatus.RUNNING).exists():
        return None
    run = next_in_line(cluster_id)
    if run is None:
        return None
    try:
        _enqueue_run(run)
    except ServiceError as exc:
        log.warning("could not enqueue the next run %s: %s", run.pk, exc.message)
        return None
    return run


# --- targets and validation ------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedTarget:
    """Where pgbench connects for a run, the password, and what the warnings need to know."""

    connection: cmd.ConnectionTarget
    password: str
    pool: ConnectionPool | None
    max_connections: int | None


def _require_serving(cluster: Cluster) -> None:
    cluster.refresh_from_db(fields=["status"])
    if not cluster.is_serving:
        raise ServiceError(
            _("The cluster is %(status)s; start it first.")
            % {"status": cluster.get_status_display().lower()},
            field="cluster",
        )


def _current_pool(
    cluster: Cluster, pool: ConnectionPool | None, pool_name: str = ""
) -> ConnectionPool | None:
    if pool is None and not pool_name:
        return None
    query = ConnectionPool.objects.filter(cluster=cluster)
    found = query.filter(pk=pool.pk).first() if pool is not None else query.filter(name=pool_name).first()
    if found is None:
        name = pool.name if pool is not None else pool_name
        raise ServiceError(_("The pool “%(name)s” no longer exists.") % {"name": name}, field="pool")
    return found


def _password(cluster: Cluster, user: str) -> str:
    try:
        return cluster.users.get(name=user).password
    except DatabaseUser.DoesNotExist:
        raise ServiceError(
            _("No user named “%(name)s” on this cluster.") % {"name": user}, field="user"
        ) from None


def resolve_target(
    cluster: Cluster,
    *,
    pool: ConnectionPool | None,
    database: str | None,
    user: str | None,
    pool_name: str = "",
) -> ResolvedTarget:
    """The load generator connects over TCP on loopback with TLS (sslmode require), like a client:
    directly to the server port, or to the pooler port with the pool name as database."""
    current = _current_pool(cluster, pool, pool_name)
    if current is not None:
        if current.user and user and user != current.user:
            raise ServiceError(
                _("The pool “%(pool)s” always logs in as “%(user)s”.")
                % {"pool": current.name, "user": current.user},
                field="user",
            )
        user_name = current.user or user or cluster.admin_user
        target = cmd.ConnectionTarget(
            LOOPBACK, int(cluster.pooler_port or 0), user_name, current.name, "require"
        )
        return ResolvedTarget(target, _password(cluster, user_name), current, 1000)
    db_name = database or cluster.default_database
    if not cluster.databases.filter(name=db_name).exists():
        raise ServiceError(
            _("No database named “%(name)s” on this cluster.") % {"name": db_name}, field="database"
        )
    user_name = user or cluster.admin_user
    host = LOOPBACK if cluster.is_local else cluster.host
    sslmode = "require" if cluster.is_local else cluster.sslmode
    target = cmd.ConnectionTarget(host, int(cluster.port or 0), user_name, db_name, sslmode)
    limit = cluster.pool_connections  # max_connections minus the superuser-reserved slots
    return ResolvedTarget(target, _password(cluster, user_name), None, limit)


_FIELD_WORDS = {
    "Clients": "clients",
    "Threads": "threads",
    "Duration": "duration",
    "Give": "duration",
    "Transactions": "transactions",
    "Progress": "progress_interval",
    "Rate": "rate",
    "Latency": "latency_limit",
    "Maximum": "max_tries",
    "Unlimited": "max_tries",
    "Unknown": "script",
    "Choose": "script",
}


def _with_script(options: cmd.RunOptions, custom_script: str | None) -> cmd.RunOptions:
    if custom_script is None:
        return options
    return replace(options, builtin=None, custom_script_path=SCRIPT_FILE)


def validate_run(
    cluster: Cluster,
    *,
    pool: ConnectionPool | None,
    database: str | None,
    user: str | None,
    options: cmd.RunOptions,
    custom_script: str | None = None,
) -> ResolvedTarget:
    """Every blocking check of a launch; raises ServiceError naming the form field."""
    _require_serving(cluster)
    target = resolve_target(cluster, pool=pool, database=database, user=user)
    options = _with_script(options, custom_script)
    errors = cmd.validate(options)
    if errors:
        raise ServiceError(" ".join(errors), field=_FIELD_WORDS.get(errors[0].split()[0]))
    if custom_script is not None:
        result = check_custom_script(
            runner.pgbench_path(cluster.version), custom_script, query_mode=options.query_mode
        )
        if not result.ok:
            raise ServiceError(result.message, field="custom_script")
    return target


def latest_dataset(cluster: Cluster, database: str) -> DataSet | None:
    return (
        DataSet.objects.filter(cluster=cluster, database=database, status=JobStatus.SUCCEEDED)
        .order_by("-finished_at")
        .first()
    )


def _warnings_for(target: ResolvedTarget, cluster: Cluster, options: cmd.RunOptions) -> list[str]:
    dataset = latest_dataset(cluster, target.pool.database if target.pool else target.connection.dbname)
    return cmd.warnings(
        options,
        scale=dataset.scale if dataset else None,
        target_max_connections=target.max_connections,
        pool_mode=target.pool.mode if target.pool else None,
        pgbouncer_version=None,
        pool_size=target.pool.size if target.pool else None,
    )


def preview_warnings(
    cluster: Cluster,
    *,
    pool: ConnectionPool | None = None,
    database: str | None = None,
    user: str | None = None,
    options: cmd.RunOptions,
    custom_script: str | None = None,
) -> list[str]:
    """Non-blocking warnings to show before launch (an empty list when the target is unknown)."""
    try:
        target = resolve_target(cluster, pool=pool, database=database, user=user)
    except ServiceError:
        return []
    return _warnings_for(target, cluster, _with_script(options, custom_script))


def _recent_tps(cluster: Cluster) -> float | None:
    for summary in (
        BenchmarkRun.objects.filter(cluster=cluster, status=RunStatus.SUCCEEDED)
        .order_by("-finished_at")
        .values_list("summary", flat=True)[:1]
    ):
        if summary and summary.get("tps"):
            return float(summary["tps"])
    return None


def choose_sampling_rate(cluster: Cluster, options: cmd.RunOptions) -> float:
    """Log every transaction unless the expected rate (--rate, else the cluster's last run, else a
    guess for an unthrottled run) passes the reader's budget; then sample down to it."""
    expected = options.rate or _recent_tps(cluster) or 5000.0
    rate = min(1.0, percentile_budget() / expected)
    return 1.0 if rate >= 1.0 else max(0.001, float(f"{rate:.2g}"))


def _options_dict(options: cmd.RunOptions) -> dict[str, Any]:
    data = dataclasses.asdict(options)
    for key in (
        "custom_script_path",
        "log_transactions",
        "log_prefix",
        "sampling_rate",
        "aggregate_interval_s",
    ):
        data.pop(key, None)
    return data


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
    options = _with_script(options, custom_script)
    run = BenchmarkRun(
        foreground=foreground,
        cluster=cluster,
        pool=target.pool,
        pool_name=target.pool.name if target.pool else "",
        database=target.pool.database if target.pool else target.connection.dbname,
        user=target.connection.user,
        sweep=sweep,
        sweep_index=sweep_index,
        label=label,
        options=_options_dict(options),
        custom_script=custom_script or "",
        clients=options.clients,
        threads=options.threads,
        duration_s=options.duration_s,
        transactions=options.transactions,
        script=options.script,
        query_mode=options.query_mode,
        warnings=_warnings_for(target, cluster, options),
        percentile_sampling_rate=choose_sampling_rate(cluster, options) if percentiles else None,
    )
    env = cmd.build_env(target.password, target.connection.sslmode, base={})
    run.command_display = cmd.display_command(
        cmd.build_run_args("pgbench", target.connection, options), env, program="pgbench"
    )
    run.save()
    return run


def launch_run(
    cluster: Cluster,
    *,
    pool: ConnectionPool | None = None,
    database: str | None = None,
    user: str | None = None,
    options: cmd.RunOptions,
    custom_script: str | None = None,
    label: str = "",
    percentiles: bool = True,
    enqueue: bool = True,
) -> BenchmarkRun:
    """Validate, record a queued run and hand it to a worker (``enqueue=False``: the caller runs it
    with :func:`execute_run`). The broker being down is a ServiceError and leaves no row behind."""
    target = validate_run(
        cluster, pool=pool, database=database, user=user, options=options, custom_script=custom_script
    )
    run = _new_run(
        cluster, target, options, custom_script, label=label, percentiles=percentiles, foreground=not enqueue
    )
    if enqueue:
        try:
            _enqueue_run(run)
        except ServiceError:
            run.delete()
            raise
    return run


def cancel_run(run: BenchmarkRun) -> BenchmarkRun:
    """Stop a queued or running run now; pgbench's process group is stopped within 2 s and the
    samples so far are kept."""
    try:
        run.cancel()
    except InvalidTransition:
        run.refresh_from_db()
        raise ServiceError(
            _("The run is %(status)s; only a queued or running run can be cancelled.")
            % {"status": run.get_status_display().lower()}
        ) from None
    run.refresh_from_db()
    if run.worker_hostname in ("", HOSTNAME):
        runner.kill_group(run.pgbench_pid, grace_s=1.5)
    # The executor also sees the status within a tick and stops its pgbench wherever it runs.
    kick_next(run.cluster_id)
    return run


# --- claiming and executing ----------------------------------------------------------------------


def claim_run(run_id: uuid.UUID | str, *, in_order: bool = True) -> BenchmarkRun | None:
    """queued → running if no other run of its cluster is running (and, ``in_order``, it is first
    in line). None when it cannot start now."""
    with transaction.atomic():
        run = BenchmarkRun.objects.select_for_update().filter(pk=run_id).first()
        if run is None or run.status != RunStatus.QUEUED:
            return None
        # On PostgreSQL the cluster row lock serialises claims; SQLite's IMMEDIATE transactions do.
        Cluster.objects.select_for_update().filter(pk=run.cluster_id).first()
        if BenchmarkRun.objects.filter(cluster_id=run.cluster_id, status=RunStatus.RUNNING).exists():
            return None
        if in_order:
            first = next_in_line(run.cluster_id)
            if first is not None and first.pk != run.pk:
                return None
        try:
            with transaction.atomic():
                run.mark_running(worker_hostname=HOSTNAME, worker_pid=os.getpid())
        except (IntegrityError, InvalidTransition):
            return None
    return run


def execute_run(
    run_id: uuid.UUID | str, *, wait_turn_s: float = 0.0, txlog_copy_to: Path | None = None
) -> BenchmarkRun:
    """Run a queued run here and now (the task's body; ``bench run --wait`` in the foreground).

    ``wait_turn_s`` > 0 waits that long for the cluster to be free instead of returning at once,
    and takes the run out of order (the foreground does not wait for queued runs of absent workers).
    """
    deadline = time.monotonic() + wait_turn_s
    while True:
        run = claim_run(run_id, in_order=wait_turn_s <= 0)
        if run is not None:
            break
        current = BenchmarkRun.objects.get(pk=run_id)
        if current.status != RunStatus.QUEUED:
            return current
        if time.monotonic() >= deadline:
            if wait_turn_s <= 0:
                kick_next(current.cluster_id)  # the first in line may have lost its message
            return current
        time.sleep(0.5)
    try:
        _Execution(run, txlog_copy_to=txlog_copy_to).execute()
    except Exception as exc:
        from celery.exceptions import SoftTimeLimitExceeded

        try:
            if isinstance(exc, SoftTimeLimitExceeded):
                run.fail(_("The run exceeded its time limit and was stopped."))
            else:
                log.exception("benchmark run %s crashed", run.pk)
                run.error(traceback.format_exc())
        except InvalidTransition:
            pass
    finally:
        kick_next(run.cluster_id)
    run.refresh_from_db()
    return run


class _Percentiles:
    """Per-interval latency percentiles from the transaction log, read while the run goes on.

    Bucket ``k`` (transactions completed in ``[start + k*interval, start + (k+1)*interval)``)
    belongs to sample ``seq = k + 1``. Buckets are kept for ``RETAIN`` intervals after the newest
    one, because each thread's log is flushed on its own schedule.
    """

    RETAIN = 120

    def __init__(self, run: BenchmarkRun, tail: TxLogTail, interval_s: float) -> None:
        self.run = run
        self.tail = tail
        self.interval_s = interval_s
        self.start_epoch: float | None = None
        self.buckets: dict[int, list[float]] = {}
        self.pending: list[Any] = []  # records read before the start is known
        self.dirty: set[int] = set()
        self.stored: dict[int, tuple[float, float, float, int]] = {}

    def set_start(self, epoch: float) -> None:
        self.start_epoch = epoch
        self._add(self.pending)
        self.pending = []

    def _add(self, records: Iterable[Any]) -> None:
        assert self.start_epoch is not None
        for record in records:
            if record.latency_us is None:
                continue
            key = max(0, int((record.end_time - self.start_epoch) // self.interval_s))
            self.buckets.setdefault(key, []).append(record.latency_us / 1000)
            self.dirty.add(key)

    def poll(self, *, final: bool = False) -> None:
        records = self.tail.poll(final=final)
        if self.start_epoch is None:
            self.pending.extend(records)
            return
        self._add(records)

    def flush(self, last_seq: int) -> None:
        """Write the percentiles of changed buckets whose sample row exists."""
        for key in sorted(self.dirty):
            seq = key + 1
            if seq > last_seq:
                continue
            values = sorted(self.buckets[key])
            figures = (percentile(values, 50), percentile(values, 95), percentile(values, 99), len(values))
            self.dirty.discard(key)
            if self.stored.get(key) == figures:
                continue
            self.stored[key] = figures
            RunSample.objects.filter(run_id=self.run.pk, seq=seq).update(
                p50_ms=figures[0], p95_ms=figures[1], p99_ms=figures[2], percentile_count=figures[3]
            )
        if self.buckets:
            newest = max(self.buckets)
            for key in [key for key in self.buckets if key < newest - self.RETAIN]:
                del self.buckets[key]


class _Execution:
    """One run of pgbench: spawn, follow both streams, store samples and errors, record the end."""

    def __init__(self, run: BenchmarkRun, *, txlog_copy_to: Path | None = None) -> None:
        self.run = run
        self.txlog_copy_to = txlog_copy_to
        self.seq = 0
        self.stdout: list[str] = []
        self.new_errors: list[tuple[ErrorLine, float]] = []
        self.error_count = 0
        self.stored_errors = 0
        self.first_error = ""
        self.stopped_reason = ""
        self.cancelled = False

    def _target(self) -> ResolvedTarget:
        run = self.run
        cluster = run.cluster
        _require_serving(cluster)
        return resolve_target(
            cluster, pool=None, pool_name=run.pool_name, database=run.database, user=run.user or None
        )

    def execute(self) -> None:
        run = self.run
        try:
            target = self._target()
        except ServiceError as exc:
            run.fail(exc.message)
            return
        options = cmd.RunOptions(**run.options)
        workdir = runner.make_workdir(workdir_prefix(run))
        try:
            if run.custom_script:
                script = workdir / SCRIPT_FILE
                runner.write_private(script, run.custom_script)
                options = replace(options, builtin=None, custom_script_path=str(script))
            sampling = run.percentile_sampling_rate
            options = replace(
                options,
                log_transactions=sampling is not None,
                log_prefix=str(workdir / "txlog") if sampling is not None else None,
                sampling_rate=sampling if sampling is not None and sampling < 1 else None,
            )
            args = cmd.build_run_args(runner.pgbench_path(run.cluster.version), target.connection, options)
            env = cmd.build_env(
                target.password,
                target.connection.sslmode,
                base=runner.base_env(),
                application_name="pgpanel-bench",
            )
            if not BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists():
                return  # cancelled between the claim and now
            try:
                proc = runner.PgbenchProcess(args, env, cwd=workdir)
            except runner.RunnerError as exc:
                run.fail(str(exc))
                return
            self._follow(proc, options, args, env, workdir)
        finally:
            if self.txlog_copy_to is not None:
                self.txlog_copy_to.mkdir(parents=True, exist_ok=True)
                for path in workdir.glob("txlog.*"):
                    (self.txlog_copy_to / path.name).write_bytes(path.read_bytes())
            runner.remove_workdir(workdir)

    def _follow(
        self,
        proc: runner.PgbenchProcess,
        options: cmd.RunOptions,
        args: list[str],
        env: dict[str, str],
        workdir: Path,
    ) -> None:
        run = self.run
        BenchmarkRun.objects.filter(pk=run.pk).update(
            pgbench_pid=proc.pid, command_display=cmd.display_command(args, env, program="pgbench")
        )
        parser = StderrParser(options.progress_shape)
        tail = TxLogTail(workdir / "txlog", pid=proc.pid, fmt=options.txlog_format)
        percentiles = _Percentiles(run, tail, options.progress_interval_s)
        limit = (run.duration_s if run.duration_s is not None else cmd.MAX_DURATION_S) + run_margin()
        deadline = time.monotonic() + limit
        next_tick = next_beat = 0.0
        try:
            while not proc.done:
                line = proc.next_line(TICK_S)
                if line is not None:
                    self._handle(line, parser, percentiles)
                now = time.monotonic()
                if now >= next_tick:
                    next_tick = now + TICK_S
                    percentiles.poll()
                    percentiles.flush(self.seq)
                    self._flush_errors()
                    if not BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists():
                        self.cancelled = True
                        proc.stop()
                    elif now >= deadline and proc.poll() is None:
                        self.stopped_reason = _("pgbench did not finish within %(s)s s and was stopped.") % {
                            "s": int(limit)
                        }
                        proc.stop()
                if now >= next_beat:
                    next_beat = now + heartbeat_interval()
                    BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                        heartbeat_at=timezone.now()
                    )
        except BaseException:
            proc.stop()
            raise
        returncode = proc.wait(10)
        if returncode is None:
            returncode = proc.stop()
        percentiles.poll(final=True)
        percentiles.flush(self.seq)
        self._flush_errors()
        self._finish(returncode, parser)

    def _handle(self, line: runner.Line, parser: StderrParser, percentiles: _Percentiles) -> None:
        if line.stream == runner.STDOUT:
            self.stdout.append(line.text)
            return
        event = parser.feed(line.text)
        if isinstance(event, ProgressSample):
            self.seq += 1
            if percentiles.start_epoch is None:
                start = line.at - event.elapsed_s
                percentiles.set_start(start)
                BenchmarkRun.objects.filter(pk=self.run.pk).update(bench_start_epoch=start)
            RunSample.objects.create(
                run_id=self.run.pk,
                seq=self.seq,
                elapsed_s=event.elapsed_s,
                tps=event.tps,
                latency_avg_ms=event.latency_avg_ms,
                latency_stddev_ms=event.latency_stddev_ms,
                failed=event.failed,
                lag_ms=event.lag_ms,
                skipped=event.skipped,
                retried=event.retried,
                retries=event.retries,
                received_at=_aware(line.at),
            )
            percentiles.flush(self.seq)
        elif isinstance(event, ErrorLine):
            self.new_errors.append((event, line.at))

    def _flush_errors(self) -> None:
        if not self.new_errors:
            return
        batch, self.new_errors = self.new_errors, []
        rows = []
        for error, at in batch:
            if error.kind not in NOT_COUNTED:
                self.error_count += 1
            if not self.first_error and error.kind in FATAL_KINDS:
                self.first_error = error.message
            if self.stored_errors < RunError.MAX_STORED:
                self.stored_errors += 1
                rows.append(
                    RunError(
                        run_id=self.run.pk,
                        at=_aware(at),
                        kind=error.kind,
                        message=error.message,
                        client_id=error.client_id,
                    )
                )
        RunError.objects.bulk_create(rows)
        BenchmarkRun.objects.filter(pk=self.run.pk).update(
            error_count=self.error_count, first_error=self.first_error
        )

    def _finish(self, returncode: int | None, parser: StderrParser) -> None:
        run = self.run
        summary = parse_summary("".join(self.stdout), run_aborted=parser.run_aborted)
        summary_data = json.loads(json.dumps(dataclasses.asdict(summary))) if summary else None
        code = returncode if returncode is not None else -9
        status, reason = classify_exit(code, summary, parser.errors)
        details = {"exit_code": code, "summary": summary_data, "aborted_clients": len(parser.aborted_clients)}
        BenchmarkRun.objects.filter(pk=run.pk).update(aborted_clients=len(parser.aborted_clients))
        try:
            if self.cancelled:
                raise InvalidTransition("cancelled")
            if self.stopped_reason:
                run.fail(self.stopped_reason, summary=summary_data, exit_code=code)
            elif status == RunStatus.SUCCEEDED:
                run.succeed(summary=summary_data, exit_code=code)
            elif status == RunStatus.COMPLETED_WITH_ERRORS:
                run.complete_with_errors(reason, summary=summary_data, exit_code=code)
            else:
                refused = next((e for e in parser.errors if e.kind == CONNECTION_FAILED), None)
                if code < 0 and refused is not None:
                    # pgbench 15 can die of a signal instead of exiting 1 when connections are refused.
                    reason = _("could not start: %(m)s") % {"m": refused.message}
                run.fail(reason, summary=summary_data, exit_code=code)
        except InvalidTransition:
            # Cancelled or reaped meanwhile: keep that status, still record what pgbench said.
            BenchmarkRun.objects.filter(pk=run.pk).update(**details)


def workdir_prefix(run: BenchmarkRun) -> str:
    return f"pgbench-run-{run.pk.hex}-"


def _aware(epoch: float) -> Any:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


# --- reaper --------------------------------------------------------------------------------------


def reap() -> list[str]:
    """Fail runs and data sets whose worker is gone, stop their pgbench, restart stalled queues."""
    notes: list[str] = []
    now = timezone.now()
    stale = now - dt.timedelta(seconds=worker_lost_after())
    for run in BenchmarkRun.objects.filter(status=RunStatus.RUNNING):
        local = run.worker_hostname == HOSTNAME
        dead = local and run.worker_pid is not None and not runner.process_alive(run.worker_pid)
        if not dead and (run.heartbeat_at is None or run.heartbeat_at >= stale):
            continue
        reason = _("worker lost: the process running it stopped sending heartbeats")
        if not BenchmarkRun.objects.filter(
            pk=run.pk, status=RunStatus.RUNNING, heartbeat_at=run.heartbeat_at
        ).update(status=RunStatus.FAILED, error_message=reason, finished_at=timezone.now()):
            continue  # it moved on meanwhile
        if local:
            runner.kill_group(run.pgbench_pid)
            runner.remove_workdirs(workdir_prefix(run))
        notes.append(f"run {run.pk}: worker lost")
        kick_next(run.cluster_id)
    for dataset in DataSet.objects.filter(status=JobStatus.RUNNING):
        if dataset.heartbeat_at is not None and dataset.heartbeat_at >= stale:
            continue
        if DataSet.objects.filter(
            pk=dataset.pk, status=JobStatus.RUNNING, heartbeat_at=dataset.heartbeat_at
        ).update(status=JobStatus.FAILED, error_message=_("worker lost"), finished_at=timezone.now()):
            runner.kill_group(dataset.pgbench_pid)
            notes.append(f"data set {dataset.pk}: worker lost")
    # Queues that stalled: nothing running, the first in line not (re)sent for a while.
    resend_before = now - dt.timedelta(seconds=requeue_after())
    busy = BenchmarkRun.objects.filter(status=RunStatus.RUNNING).values_list("cluster_id", flat=True)
    waiting = (
        BenchmarkRun.objects.filter(status=RunStatus.QUEUED)
        .exclude(cluster_id__in=busy)
        .values_list("cluster_id", flat=True)
    )
    for cluster_id in set(waiting):
        first = next_in_line(cluster_id)
        stalled = first is not None and (first.enqueued_at is None or first.enqueued_at < resend_before)
        if stalled and kick_next(cluster_id) is not None:
            notes.append(f"run {first.pk}: enqueued again")
    return notes


# --- data sets -----------------------------------------------------------------------------------


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
    _require_serving(cluster)
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
            _send(INIT_TASK, str(dataset.pk), time_limit=6 * 3600)
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
    proc = runner.PgbenchProcess(args, env)
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
        with dbconn.admin_connection(cluster, dbname=database) as conn:
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'pgbench\\_%'"
            ).fetchone()
    except dbconn.DatabaseError:
        return None
    return int(row[0]) if row and row[0] is not None else None


# --- reading runs: compare, export ---------------------------------------------------------------

SAMPLE_FIELDS = (
    "seq",
    "elapsed_s",
    "tps",
    "latency_avg_ms",
    "latency_stddev_ms",
    "failed",
    "lag_ms",
    "skipped",
    "retried",
    "retries",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "percentile_count",
)


def samples_after(run: BenchmarkRun, after: int = 0, limit: int = 5000) -> list[dict[str, Any]]:
    """Samples with ``seq > after``, for a chart fed incrementally."""
    return list(run.samples.filter(seq__gt=after).order_by("seq").values(*SAMPLE_FIELDS)[:limit])


def run_record(run: BenchmarkRun) -> dict[str, Any]:
    """What a run is, in JSON-friendly types (export, compare, the CLI)."""
    return {
        "id": str(run.pk),
        "label": str(run),
        "cluster": run.cluster.name,
        "target": run.target_display,
        "pool": run.pool_name or None,
        "database": run.database,
        "user": run.user,
        "status": run.status,
        "status_meaning": str(run.status_meaning),
        "clients": run.clients,
        "threads": run.threads,
        "duration_s": run.duration_s,
        "transactions": run.transactions,
        "script": run.script,
        "query_mode": run.query_mode,
        "options": run.options,
        "command": run.command_display,
        "exit_code": run.exit_code,
        "error_message": run.error_message,
        "first_error": run.first_error,
        "error_count": run.error_count,
        "aborted_clients": run.aborted_clients,
        "percentile_sampling_rate": run.percentile_sampling_rate,
        "tps": run.tps,
        "latency_avg_ms": run.latency_avg_ms,
        "summary": run.summary,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def compare_runs(runs: Sequence[BenchmarkRun]) -> dict[str, Any]:
    """Series aligned on the interval number (x = seq × progress interval), one column per run,
    ``None`` where a run has no sample, plus each run's summary."""
    if len(runs) < 2:
        raise ServiceError(_("Pick at least two runs to compare."), field="runs")
    columns: dict[str, dict[int, dict[str, Any]]] = {}
    longest = 0
    for run in runs:
        rows = {row["seq"]: row for row in run.samples.order_by("seq").values(*SAMPLE_FIELDS)}
        columns[str(run.pk)] = rows
        longest = max(longest, max(rows, default=0))
    seqs = list(range(1, longest + 1))
    series: dict[str, dict[str, list[Any]]] = {}
    for metric in ("tps", "latency_avg_ms", "p50_ms", "p95_ms", "p99_ms", "failed"):
        series[metric] = {
            run_id: [rows.get(seq, {}).get(metric) for seq in seqs] for run_id, rows in columns.items()
        }
    interval = {str(run.pk): run.options.get("progress_interval_s", 1) for run in runs}
    return {
        "x": seqs,
        "interval_s": interval,
        "series": series,
        "runs": [run_record(run) for run in runs],
        "tps_bars": [{"id": str(run.pk), "label": str(run), "tps": run.tps} for run in runs],
    }


def export_run(run: BenchmarkRun, fmt: str = "csv") -> str:
    """The run's samples as CSV, or the whole record (summary, samples, errors) as JSON."""
    samples = samples_after(run, 0, limit=10_000_000)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=SAMPLE_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(samples)
        return out.getvalue()
    if fmt == "json":
        errors = list(run.errors.order_by("id").values("at", "kind", "message", "client_id"))
        for error in errors:
            error["at"] = error["at"].isoformat()
        return json.dumps({**run_record(run), "samples": samples, "errors": errors}, indent=2)
    raise ServiceError(_("Unknown export format %(f)s: choose csv or json.") % {"f": fmt}, field="format")


# --- sweeps --------------------------------------------------------------------------------------


def launch_sweep(
    cluster: Cluster,
    *,
    clients_list: Sequence[int],
    pools: Sequence[ConnectionPool | None],
    repeats: int,
    base_options: cmd.RunOptions,
    database: str | None = None,
    user: str | None = None,
    name: str = "",
    enqueue: bool = True,
) -> Sweep:
    """Plan runs over client counts × targets (``None`` = direct) × repeats, queued in order and
    executed one after the other."""
    if not clients_list or not pools:
        raise ServiceError(_("Give at least one client count and one target."), field="clients_list")
    if not 1 <= repeats <= 20:
        raise ServiceError(_("Repeats must be between 1 and 20."), field="repeats")
    cpus = os.cpu_count()
    plan: list[tuple[ResolvedTarget, cmd.RunOptions]] = []
    for clients in clients_list:
        options = replace(base_options, clients=clients, threads=cmd.default_threads(clients, cpus))
        for pool in pools:
            target = validate_run(cluster, pool=pool, database=database, user=user, options=options)
            plan.extend((target, options) for _repeat in range(repeats))
    targets = [{"kind": "pool", "pool": pool.name} if pool else {"kind": "direct"} for pool in pools]
    with transaction.atomic():
        sweep = Sweep.objects.create(
            cluster=cluster,
            name=name,
            clients_list=list(clients_list),
            targets=targets,
            repeats=repeats,
            base_options=_options_dict(base_options),
        )
        created = timezone.now()
        for index, (target, options) in enumerate(plan):
            run = _new_run(cluster, target, options, None, sweep=sweep, sweep_index=index)
            BenchmarkRun.objects.filter(pk=run.pk).update(created_at=created)  # one instant: order by index
    if enqueue:
        try:
            if not BenchmarkRun.objects.filter(cluster=cluster, status=RunStatus.RUNNING).exists():
                first = next_in_line(cluster.pk)
                if first is not None:
                    _enqueue_run(first)
        except ServiceError:
            sweep.runs.all().delete()
            sweep.delete()
            raise
    return sweep


def sweep_results(sweep: Sweep) -> dict[str, list[dict[str, Any]]]:
    """Per target, mean TPS and latency by client count over finished repeats (the sweep chart)."""
    results: dict[str, dict[int, list[BenchmarkRun]]] = {}
    for run in sweep.runs.order_by("sweep_index"):
        results.setdefault(run.target_display, {}).setdefault(run.clients, []).append(run)
    out: dict[str, list[dict[str, Any]]] = {}
    for target, by_clients in results.items():
        points = []
        for clients, runs in sorted(by_clients.items()):
            done = [
                r
                for r in runs
                if r.status in (RunStatus.SUCCEEDED, RunStatus.COMPLETED_WITH_ERRORS) and r.tps
            ]
            points.append(
                {
                    "clients": clients,
                    "runs": len(runs),
                    "finished": len(done),
                    "tps": sum(r.tps or 0 for r in done) / len(done) if done else None,
                    "latency_avg_ms": sum(r.latency_avg_ms or 0 for r in done) / len(done) if done else None,
                    "statuses": [r.status for r in runs],
                }
            )
        out[target] = points
    return out
