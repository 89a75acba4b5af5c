"""Claiming a queued run and executing it: prepare, spawn its engine's program, follow it to its end
(``recorder.RunRecorder`` stores what the engine's reader makes of the tool's output)."""

from __future__ import annotations

import logging
import os
import time
import traceback
import uuid
from dataclasses import replace
from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_txlog import TxLogTail
from benchmarks.models import BenchmarkRun, InvalidTransition, RunStatus
from benchmarks.services.config import HOSTNAME, SCRIPT_FILE, heartbeat_interval
from benchmarks.services.enqueue import kick_next, next_in_line, run_time_limit
from benchmarks.services.failure import NOT_PREPARED, NOT_STARTED
from benchmarks.services.launch import refuse_shell_commands
from benchmarks.services.percentiles import Percentiles
from benchmarks.services.pooler_watch import PoolerWatch
from benchmarks.services.recorder import RunRecorder
from benchmarks.services.room import wait_for_room
from benchmarks.services.sweep_pool import after_run, prepare_step
from benchmarks.services.targets import ResolvedTarget, require_serving, resolve_target
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError

log = logging.getLogger(__name__)

TICK_S = 0.25  # how often the executor checks for a cancel and reads the transaction log


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
        try:
            after_run(run)  # the last run of a pool-size sweep gives its pool back
        except Exception:
            log.exception("restoring the pool of sweep %s failed", run.sweep_id)
        kick_next(run.cluster_id)
    run.refresh_from_db()
    return run


class _Execution:
    """One run of an engine's program: spawn, follow both streams, store samples and errors, record the end."""

    def __init__(self, run: BenchmarkRun, *, txlog_copy_to: Path | None = None) -> None:
        self.run = run
        self.txlog_copy_to = txlog_copy_to
        self.stopped_reason = ""
        self.cancelled = False
        self.client: dict[str, object] = {}

    def _target(self) -> ResolvedTarget:
        run = self.run
        cluster = run.cluster
        require_serving(cluster)
        return resolve_target(
            cluster, pool=None, pool_name=run.pool_name, database=run.database, user=run.user or None
        )

    def execute(self) -> None:
        run = self.run
        try:
            target = self._target()
            prepare_step(run)  # a pool-size sweep's step: its pool resized first, online
            if target.pool is not None:
                target.pool.refresh_from_db()  # the step's size, for counting its connections
        except ServiceError as exc:
            run.fail(exc.message)
            return
        options = cmd.RunOptions.from_json(run.options)
        try:
            # Counted again now, never made by closing the pools' servers: see ``room``.
            wait_for_room(run, target, options.clients)
        except ServiceError as exc:
            run.fail(exc.message)
            return
        engine = engines.ENGINES[options.engine]
        if run.custom_script:
            # Queued before the rule existed, or written around the launch service: never run it.
            try:
                refuse_shell_commands(run.custom_script)
            except ServiceError as exc:
                run.fail(exc.message)
                return
        try:
            workdir = runner.make_workdir(workdir_prefix(run))
        except (runner.RunnerError, OSError) as exc:
            # The error names the directory (a path): the log's, not the page's.
            log.warning("benchmark run %s: no work directory: %s", run.pk, exc)
            run.fail(_(NOT_PREPARED) % {"tool": engine.name})
            return
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
            # The pool's mode now, not at launch (sysbench: prepared statements off through a pool).
            options = engine.for_target(options, target.pool.mode if target.pool else None)
            # Again here, as the shell-command rule above: sysbench runs whatever Lua file its
            # script argument names, and a row written around the launch service is not checked.
            found = engine.problems(options)
            if found:
                run.fail(" ".join(str(message) for _field, message in found))
                return
            args = engine.run_args(
                runner.program_path(engine.name, run.cluster.version), target.connection, options
            )
            # libpq reads the password and TLS mode from the environment, never from argv.
            env = engine.env(
                target.password,
                target.connection.sslmode,
                base=runner.base_env(),
                application_name="pgpanel-bench",
            )
            if not BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists():
                return  # cancelled between the claim and now
            # The client off the server's plan: the node's clients' group, never the cluster's.
            group = runner.client_cgroup()
            try:
                proc = runner.LoadProcess(args, env, cwd=workdir, join=group.procs_files)
            except runner.RunnerError as exc:
                log.warning("benchmark run %s did not start: %s", run.pk, exc)
                run.fail(_(NOT_STARTED) % {"tool": engine.name})
                return
            self.client = {
                "node": HOSTNAME,
                "cgroup": group.path,
                "memory_bytes": group.memory_bytes,
                "cpu_weight": group.cpu_weight,
                "weight_of_default": group.weight_of_default,
            }
            self._follow(proc, options, args, env, workdir)
        finally:
            if self.txlog_copy_to is not None:
                self.txlog_copy_to.mkdir(parents=True, exist_ok=True)
                for path in workdir.glob("txlog.*"):
                    (self.txlog_copy_to / path.name).write_bytes(runner.read_private(path))
            runner.remove_workdir(workdir)

    def _follow(
        self,
        proc: runner.LoadProcess,
        options: cmd.RunOptions,
        args: list[str],
        env: dict[str, str],
        workdir: Path,
    ) -> None:
        run = self.run
        # The exact argument list and environment that ran (no password: see spawned_env), for
        # the run page's command; command_display stays the short summary of older runs.
        BenchmarkRun.objects.filter(pk=run.pk).update(
            pgbench_pid=proc.pid,
            command_display=cmd.display_command(args, env, program=options.engine),
            argv=list(args),
            argv_env=cmd.spawned_env(env),
            workdir=str(workdir),
            client=self.client,
        )
        recorder = _recorder(run, proc, options, workdir)
        pooler = PoolerWatch.for_run(run)  # why a pool run is slower, if it is: see the run page
        limit = run_time_limit(run)
        deadline = time.monotonic() + limit
        next_tick = next_beat = 0.0
        try:
            while not proc.done:
                line = proc.next_line(TICK_S)
                if line is not None:
                    recorder.handle(line)
                now = time.monotonic()
                if now >= next_tick:
                    next_tick = now + TICK_S
                    proc.sample_cpu()
                    recorder.tick()
                    if pooler is not None:
                        pooler.tick()
                    if not BenchmarkRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).exists():
                        self.cancelled = True
                        proc.stop()
                    elif now >= deadline and proc.poll() is None:
                        self.stopped_reason = _("%(tool)s did not finish within %(s)s s and was stopped.") % {
                            "tool": options.engine,
                            "s": int(limit),
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
        proc.sample_cpu()  # if it has not closed its streams yet, the last reading before it is reaped
        returncode = proc.wait(10)
        if returncode is None:
            returncode = proc.stop()
        BenchmarkRun.objects.filter(pk=run.pk).update(
            client={**self.client, "cpu_s": proc.cpu_s, "wall_s": round(proc.wall_s, 3)}
        )
        if pooler is not None:
            pooler.save()
        recorder.finish(returncode, cancelled=self.cancelled, stopped_reason=self.stopped_reason)


def _recorder(
    run: BenchmarkRun, proc: runner.LoadProcess, options: cmd.RunOptions, workdir: Path
) -> RunRecorder:
    """The engine's reader of the tool's output, and the transaction log's percentiles for an
    engine that keeps one (pgbench -l)."""
    engine = engines.ENGINES[options.engine]
    percentiles = None
    if engine.logs_transactions:
        tail = TxLogTail(workdir / "txlog", pid=proc.pid, fmt=options.txlog_format)
        percentiles = Percentiles(run, tail, options.progress_interval_s)
    return RunRecorder(run, engine.reader(options), percentiles)


def workdir_prefix(run: BenchmarkRun) -> str:
    return f"pgbench-run-{run.pk.hex}-"
