"""A data set: ``pgbench -i`` or ``sysbench prepare`` run in one database of a cluster, its progress and outcome."""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
from benchmarks.models.status import Engine, InvalidTransition, JobStatus
from panel.clusters.models import Cluster
from panel.core.errors import message_from_json


class DataSet(models.Model):
    """A benchmark's tables in one database of a cluster: pgbench's, created by ``pgbench -i`` at a
    scale factor, or sysbench's ``sbtest1…N``, created by ``sysbench prepare`` (tables × rows)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="datasets")
    database = models.CharField(_("database"), max_length=63)
    engine = models.CharField(max_length=16, choices=engines.choices, default=Engine.PGBENCH)
    scale = models.PositiveIntegerField(_("scale factor"), null=True, blank=True)  # pgbench
    tables = models.PositiveIntegerField(_("tables"), null=True, blank=True)  # sysbench
    table_size = models.PositiveIntegerField(_("rows per table"), null=True, blank=True)  # sysbench
    init_steps = models.CharField(max_length=16, blank=True)
    foreign_keys = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    progress_message = models.CharField(max_length=200, blank=True)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    error_message = models.TextField(blank=True)
    command_display = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    pgbench_pid = models.IntegerField(null=True, blank=True)  # the loader's: pgbench -i or sysbench prepare

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.CheckConstraint(condition=Q(progress__lte=100), name="dataset_progress_at_most_100"),
            models.CheckConstraint(condition=Q(scale__gte=1), name="dataset_scale_at_least_1"),
            # A data set has a shape: a scale, or tables and their rows (which one is its engine's
            # word, ``Engine.dataset_spec``: no engine is named here, so a new one needs no migration).
            models.CheckConstraint(
                condition=Q(scale__isnull=False) | Q(tables__gte=1, table_size__gte=1),
                name="dataset_has_a_shape",
            ),
        ]
        indexes = [
            models.Index(fields=("cluster", "database", "status"), name="dataset_cluster_db_status_idx"),
            models.Index(fields=("status", "heartbeat_at"), name="dataset_status_heartbeat_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.database} {engines.ENGINES[self.engine].short_shape(self.spec)}"

    @property
    def spec(self) -> engines.DatasetSpec:
        """What the data set is made of, as its engine reads it."""
        return engines.DatasetSpec(
            scale=self.scale,
            init_steps=self.init_steps or None,
            foreign_keys=self.foreign_keys,
            tables=self.tables,
            table_size=self.table_size,
        )

    @property
    def shape(self) -> str:
        """What the data set holds, in the tool's own terms (``bench init`` prints it)."""
        return engines.ENGINES[self.engine].shape(self.spec)

    @property
    def progress_shown(self) -> str:
        """The progress line in the reader's language: the worker keeps a Message as JSON (its
        template and parameters), a plain step as its English words (the catalogue's id)."""
        text = self.progress_message
        if text.startswith("{"):
            with contextlib.suppress(ValueError):
                return str(message_from_json(json.loads(text)))
        return gettext(text) if text else ""

    @property
    def is_terminal(self) -> bool:
        return self.status in JobStatus.TERMINAL

    def _transition(self, allowed: set[str], **fields: Any) -> None:
        if not DataSet.objects.filter(pk=self.pk, status__in=allowed).update(**fields):
            raise InvalidTransition(f"data set {self.pk} is not {'/'.join(sorted(allowed))}")
        for name, value in fields.items():
            setattr(self, name, value)

    def mark_running(self) -> None:
        now = timezone.now()
        self._transition({JobStatus.QUEUED}, status=JobStatus.RUNNING, started_at=now, heartbeat_at=now)

    def succeed(self, *, size_bytes: int | None, duration_s: float) -> None:
        self._transition(
            {JobStatus.RUNNING},
            status=JobStatus.SUCCEEDED,
            progress=100,
            progress_message="",
            size_bytes=size_bytes,
            duration_s=duration_s,
            finished_at=timezone.now(),
        )

    def _stop(self, status: str, message: str) -> None:
        """queued or running → failed or errored, with the reason or the traceback."""
        self._transition(
            {JobStatus.QUEUED, JobStatus.RUNNING},
            status=status,
            error_message=message,
            finished_at=timezone.now(),
        )

    def fail(self, reason: str) -> None:
        self._stop(JobStatus.FAILED, reason)

    def error(self, traceback_text: str) -> None:
        self._stop(JobStatus.ERRORED, traceback_text)
