"""Runs: the sweep that plans them, one run's request, state and outcome, its samples and errors."""

from __future__ import annotations

import os
import uuid
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
from benchmarks.lib.client_cpu import client_cores, is_client_bound
from benchmarks.models.status import Engine, InvalidTransition, RunStatus
from panel.clusters.models import Cluster
from panel.core.errors import message_from_json


class SweepKind(models.TextChoices):
    """What a sweep varies beside the client count: where the runs connect, or one pool's size."""

    TARGETS = "targets", _("Clients × targets")
    POOL_SIZES = "pool_sizes", _("Clients × pool sizes")


class Sweep(models.Model):
    """A plan of runs (client counts × targets, or × sizes of one pool, × repeats) executed one
    after the other. A pool-size sweep resizes its pool before each step and gives the pool its
    original size back (or removes the scratch pool it made) once no run of it is left to execute."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="sweeps")
    name = models.CharField(max_length=100, blank=True)
    kind = models.CharField(max_length=16, choices=SweepKind.choices, default=SweepKind.TARGETS)
    clients_list = models.JSONField(default=list)
    # [{"kind": "direct"} | {"kind": "pool", "pool": "<name>"}, ...]
    targets = models.JSONField(default=list)
    pool_sizes = models.JSONField(default=list, blank=True)
    # The pool a pool-size sweep resizes, its size before the sweep (None: a scratch pool the
    # sweep made and removes), and when it was put back (or why that failed).
    pool_name = models.CharField(max_length=60, blank=True)
    original_pool_size = models.PositiveIntegerField(null=True, blank=True)
    scratch_pool = models.BooleanField(default=False)
    restored_at = models.DateTimeField(null=True, blank=True)
    restore_error = models.TextField(blank=True)
    repeats = models.PositiveSmallIntegerField(default=1)
    base_options = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-created_at",)
        constraints = [models.CheckConstraint(condition=Q(repeats__gte=1), name="sweep_repeats_at_least_1")]

    def __str__(self) -> str:
        return self.name or gettext("sweep %(id)s") % {"id": self.pk}

    @property
    def resizes_pool(self) -> bool:
        return self.kind == SweepKind.POOL_SIZES


class BenchmarkRun(models.Model):
    """One pgbench or sysbench run: what was asked, its state, the exact command, its outcome and summary."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="benchmark_runs")
    pool = models.ForeignKey(
        "pools.ConnectionPool",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="benchmark_runs",
    )
    pool_name = models.CharField(max_length=60, blank=True, help_text=_("Empty: the cluster directly."))
    database = models.CharField(max_length=63)
    user = models.CharField(max_length=63)
    sweep = models.ForeignKey(Sweep, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs")
    sweep_index = models.PositiveIntegerField(default=0)
    # A pool-size sweep's step: the size its pool is given before it runs, and the ``pool_size``
    # PgBouncer's SHOW DATABASES reported for the pool once it was (what the step ran against).
    pool_size = models.PositiveIntegerField(null=True, blank=True)
    pool_size_applied = models.PositiveIntegerField(null=True, blank=True)
    label = models.CharField(max_length=100, blank=True)
    # Executed by the process that launched it (``bench run --wait``), never sent to a worker:
    # it takes the cluster when it is free, without waiting for the queued runs of workers.
    foreground = models.BooleanField(default=False)

    # What was asked: RunOptions as a dict (custom_script_path left out), and the columns lists
    # and charts sort and group by.
    options = models.JSONField(default=dict)
    custom_script = models.TextField(blank=True)
    engine = models.CharField(max_length=16, choices=engines.choices, default=Engine.PGBENCH)
    clients = models.PositiveIntegerField()
    threads = models.PositiveIntegerField()
    duration_s = models.PositiveIntegerField(null=True, blank=True)
    transactions = models.PositiveIntegerField(null=True, blank=True)
    script = models.CharField(max_length=32)
    query_mode = models.CharField(max_length=16, default="simple")
    warnings = models.JSONField(default=list, blank=True)

    status = models.CharField(max_length=32, choices=RunStatus.choices, default=RunStatus.QUEUED)
    command_display = models.TextField(
        blank=True, help_text=_("The equivalent shell command, password redacted.")
    )
    # What was spawned (pgbench or sysbench), stored when it started: the exact argument list, the ``PG*``/``LC_*``
    # variables of its environment (secret values stored as None, never the password), and the
    # private work directory its arguments name. The run page renders the command from these.
    argv = models.JSONField(default=list, blank=True)
    argv_env = models.JSONField(default=dict, blank=True)
    workdir = models.CharField(max_length=255, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    summary = models.JSONField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    first_error = models.TextField(blank=True)
    aborted_clients = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)
    percentile_sampling_rate = models.FloatField(null=True, blank=True)
    # Unix time pgbench's benchmark started: interval k of the transaction log is
    # [start + k*interval, start + (k+1)*interval), which is sample seq k+1.
    bench_start_epoch = models.FloatField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker_hostname = models.CharField(max_length=255, blank=True)
    worker_pid = models.IntegerField(null=True, blank=True)
    pgbench_pid = models.IntegerField(null=True, blank=True)  # the load generator's, sysbench's too
    # Where the load generator ran and what it used (docs/benchmarks.md): ``node``, ``cgroup`` (""
    # where cgroups cannot be written), ``memory_bytes``, ``cpu_weight`` and ``weight_of_default``
    # (the clients' group's limits), ``cpu_s`` (its CPU time) and ``wall_s`` (its lifetime).
    client = models.JSONField(default=dict, blank=True)
    # A run through a pool: PgBouncer watched once a second while it ran (``lib/pooler_load.py``):
    # ``pool_size``, ``clients``, ``samples`` and their ``summary``; {} for a direct run.
    pooler = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            # Runs on one cluster execute one at a time: the database refuses a second claim.
            models.UniqueConstraint(
                fields=("cluster",),
                condition=Q(status="running"),
                name="benchmarkrun_one_running_per_cluster",
            ),
            models.CheckConstraint(condition=Q(clients__gte=1), name="benchmarkrun_clients_at_least_1"),
            models.CheckConstraint(condition=Q(threads__gte=1), name="benchmarkrun_threads_at_least_1"),
            models.CheckConstraint(
                condition=Q(status__in=[choice.value for choice in RunStatus]),
                name="benchmarkrun_status_known",
            ),
        ]
        indexes = [
            # The queue: next queued run of a cluster, in order.
            models.Index(fields=("cluster", "status", "created_at"), name="benchmarkrun_queue_idx"),
            # The reaper: running runs by heartbeat.
            models.Index(fields=("status", "heartbeat_at"), name="benchmarkrun_status_hb_idx"),
            models.Index(fields=("sweep", "sweep_index"), name="benchmarkrun_sweep_idx"),
        ]

    def __str__(self) -> str:
        if self.label:
            return self.label
        return gettext("%(clients)s clients → %(target)s") % {
            "clients": self.clients,
            "target": self.target_display,
        }

    @property
    def warning_messages(self) -> list[Any]:
        """The warnings in the reader's language (Messages; plain text for rows from before)."""
        return [message_from_json(warning) for warning in self.warnings or []]

    @property
    def target_display(self) -> str:
        """Where the run connects, for people: also the sweep chart's line labels."""
        return gettext("pool %(name)s") % {"name": self.pool_name} if self.pool_name else gettext("direct")

    @property
    def is_terminal(self) -> bool:
        return self.status in RunStatus.TERMINAL

    @property
    def status_meaning(self) -> Any:
        engine = engines.engine_for(self.engine)
        own = engine.status_meaning(self.status) if engine is not None else None
        return str(own) if own is not None else RunStatus.MEANING.get(self.status, "")

    @property
    def query_mode_option(self) -> str:
        """The tool's own option the query mode is (sysbench's ``--db-ps-mode``); empty: pgbench's
        query mode, shown as such."""
        engine = engines.engine_for(self.engine)
        return engine.query_mode_option if engine is not None else ""

    @property
    def queue_position(self) -> int | None:
        """How many runs are ahead of this one on its cluster (running included); None unless queued."""
        if self.status != RunStatus.QUEUED:
            return None
        ahead = BenchmarkRun.objects.filter(cluster_id=self.cluster_id).filter(
            Q(status=RunStatus.RUNNING)
            | Q(status=RunStatus.QUEUED, created_at__lt=self.created_at)
            | Q(status=RunStatus.QUEUED, created_at=self.created_at, sweep_index__lt=self.sweep_index)
        )
        return ahead.count()

    @property
    def tps(self) -> float | None:
        return (self.summary or {}).get("tps")

    @property
    def client_cores(self) -> float | None:
        """The load generator's average CPU use, in cores (1.0: one core busy the whole run)."""
        return client_cores(self.client)

    @property
    def client_bound(self) -> bool:
        """Whether the client used about all the CPU its threads can: the figure is its limit."""
        return is_client_bound(self.client_cores, self.threads, os.cpu_count())

    @property
    def latency_avg_ms(self) -> float | None:
        return (self.summary or {}).get("latency_avg_ms")

    # --- transitions ---------------------------------------------------------------------------

    def _transition(self, allowed: set[str], **fields: Any) -> None:
        if not BenchmarkRun.objects.filter(pk=self.pk, status__in=allowed).update(**fields):
            current = BenchmarkRun.objects.filter(pk=self.pk).values_list("status", flat=True).first()
            raise InvalidTransition(f"run {self.pk} is {current}, not {'/'.join(sorted(allowed))}")
        for name, value in fields.items():
            setattr(self, name, value)

    def mark_running(self, *, worker_hostname: str = "", worker_pid: int | None = None) -> None:
        """queued → running. The caller holds the claim transaction (see services.claim_run);
        a second running run on the cluster raises IntegrityError."""
        now = timezone.now()
        self._transition(
            {RunStatus.QUEUED},
            status=RunStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            worker_hostname=worker_hostname,
            worker_pid=worker_pid,
        )

    def _finish(self, status: str, **fields: Any) -> None:
        self._transition({RunStatus.RUNNING}, status=status, finished_at=timezone.now(), **fields)

    def succeed(self, *, summary: dict[str, Any] | None, exit_code: int) -> None:
        self._finish(RunStatus.SUCCEEDED, summary=summary, exit_code=exit_code)

    def complete_with_errors(self, reason: str, *, summary: dict[str, Any] | None, exit_code: int) -> None:
        self._finish(
            RunStatus.COMPLETED_WITH_ERRORS, error_message=reason, summary=summary, exit_code=exit_code
        )

    def fail(
        self, reason: str, *, summary: dict[str, Any] | None = None, exit_code: int | None = None
    ) -> None:
        """running → failed; a queued run can fail too (its target vanished before it started)."""
        self._stop(RunStatus.FAILED, error_message=reason, summary=summary, exit_code=exit_code)

    def cancel(self) -> None:
        self._stop(RunStatus.CANCELLED)

    def error(self, traceback_text: str) -> None:
        self._stop(RunStatus.ERRORED, error_message=traceback_text)

    def _stop(self, status: str, **fields: Any) -> None:
        """queued or running → a terminal status (the run may not have started)."""
        self._transition(
            {RunStatus.QUEUED, RunStatus.RUNNING}, status=status, finished_at=timezone.now(), **fields
        )


class RunSample(models.Model):
    """One progress interval of a run (pgbench's ``progress:`` line, with percentiles from its
    transaction log that arrive later and are filled in by an update; or sysbench's interval line)."""

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="samples")
    seq = models.PositiveIntegerField()
    elapsed_s = models.FloatField()
    tps = models.FloatField()
    # None for sysbench, whose interval lines give one percentile (p95_ms), not the average.
    latency_avg_ms = models.FloatField(null=True, blank=True)
    latency_stddev_ms = models.FloatField(null=True, blank=True)
    qps = models.FloatField(null=True, blank=True)  # sysbench's queries per second
    failed = models.IntegerField(null=True, blank=True)
    lag_ms = models.FloatField(null=True, blank=True)
    skipped = models.IntegerField(null=True, blank=True)
    retried = models.IntegerField(null=True, blank=True)
    retries = models.IntegerField(null=True, blank=True)
    p50_ms = models.FloatField(null=True, blank=True)
    p95_ms = models.FloatField(null=True, blank=True)
    p99_ms = models.FloatField(null=True, blank=True)
    percentile_count = models.PositiveIntegerField(null=True, blank=True)
    # When the runner read pgbench's line, and when the row was written: the live lag.
    received_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("run", "seq")
        constraints = [
            # Also the index of the data endpoint's ``WHERE run_id = … AND seq > after``.
            models.UniqueConstraint(fields=("run", "seq"), name="runsample_unique_run_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id} #{self.seq}"


class RunError(models.Model):
    """An error pgbench printed during a run (connection refused, client aborted, …). At most
    ``MAX_STORED`` are kept per run; ``BenchmarkRun.error_count`` counts them all."""

    MAX_STORED: ClassVar[int] = 200

    run = models.ForeignKey(BenchmarkRun, on_delete=models.CASCADE, related_name="errors")
    at = models.DateTimeField(default=timezone.now)
    kind = models.CharField(max_length=32)
    message = models.TextField()
    client_id = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ("run", "id")
        indexes = [models.Index(fields=("run", "id"), name="runerror_run_id_idx")]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message[:60]}"
