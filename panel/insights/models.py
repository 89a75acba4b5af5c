"""Stored metrics (raw points, 5-minute rollups, counter state) and alert rules with their state."""

from __future__ import annotations

from typing import ClassVar

from django.db import NotSupportedError, models
from django.db.models import Func, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel.clusters.models import Cluster


class EpochMs(Func):
    """Milliseconds since the epoch of a datetime column, computed by the database.

    Charts and rollups want numbers; converting tens of thousands of datetimes row by row in
    Python costs several times the query itself (scripts/perf/insights_page.py).
    """

    output_field = models.BigIntegerField()
    arity = 1

    @property
    def convert_value(self):
        # Both databases already return an integer: no converter call per row.
        return self._convert_value_noop

    def as_sql(self, compiler, connection, **extra_context):
        raise NotSupportedError(f"EpochMs is not written for {connection.vendor}")

    def as_sqlite(self, compiler, connection, **extra_context):
        # Django stores naive UTC text; julianday() keeps milliseconds.
        template = "CAST(ROUND((julianday(%(expressions)s) - 2440587.5) * 86400000.0) AS INTEGER)"
        return super().as_sql(compiler, connection, template=template, **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        template = POSTGRESQL_EPOCH_MS
        return super().as_sql(compiler, connection, template=template, **extra_context)


POSTGRESQL_EPOCH_MS = "CAST(ROUND(EXTRACT(EPOCH FROM %(expressions)s) * 1000) AS BIGINT)"


class MetricPoint(models.Model):
    """One raw value of one series at one collection; kept 24 hours.

    ``value`` is NULL for a gap: the source did not answer, or a counter was reset and its rate
    series starts again. Charts draw NULL as a break, never as zero.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="metric_points")
    metric = models.CharField(max_length=32)
    labels = models.CharField(max_length=96, blank=True)
    ts = models.DateTimeField()
    value = models.FloatField(null=True)

    class Meta:
        indexes = [
            # series() for charts: one series over a time range
            models.Index(fields=("cluster", "metric", "labels", "ts"), name="metricpoint_series_idx"),
            # latest(): every series of one collection; prune: everything before a time
            models.Index(fields=("cluster", "ts"), name="metricpoint_cluster_ts_idx"),
            models.Index(fields=("ts",), name="metricpoint_ts_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.metric}{{{self.labels}}} {self.ts:%H:%M:%S} {self.value}"


class MetricRollup(models.Model):
    """min, max, average and count of one series over a bucket of ``seconds``.

    1-minute buckets (kept 24 hours) and 5-minute buckets (kept 30 days) come from the raw points;
    hourly ones (30 days) merge the 5-minute ones, so a 30-day chart reads 720 rows a series
    instead of 8,640.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="metric_rollups")
    metric = models.CharField(max_length=32)
    labels = models.CharField(max_length=96, blank=True)
    seconds = models.PositiveIntegerField(default=300)
    bucket = models.DateTimeField()
    min = models.FloatField()
    max = models.FloatField()
    avg = models.FloatField()
    count = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "metric", "labels", "seconds", "bucket"),
                name="metricrollup_one_per_bucket",
            ),
            models.CheckConstraint(condition=Q(count__gte=1), name="metricrollup_count_positive"),
        ]
        indexes = [
            # pruning and the rollup pass: every series before or after a time
            models.Index(fields=("bucket",), name="metricrollup_bucket_idx"),
            # charts: every series of one cluster and tier over a window
            models.Index(fields=("cluster", "seconds", "bucket"), name="metricrollup_window_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.metric}{{{self.labels}}} {self.bucket:%Y-%m-%d %H:%M} avg={self.avg}"


class CounterState(models.Model):
    """The last raw reading of one counter (or a server's start time, ``_start``), for the next rate."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="counter_states")
    source = models.CharField(max_length=16)
    counter = models.CharField(max_length=32)
    labels = models.CharField(max_length=96, blank=True)
    ts = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "counter", "labels"), name="counterstate_one_per_series"
            )
        ]

    def __str__(self) -> str:
        return f"{self.counter}{{{self.labels}}} = {self.value}"


class AlertKind(models.TextChoices):
    CPU_PERCENT = "cpu_percent", _("CPU %")
    # xgettext:no-python-format
    CONNECTIONS_PERCENT = "connections_percent", _("Connections (% of max_connections)")
    POOL_WAITING_CLIENTS = "pool_waiting_clients", _("Clients waiting in a pool")
    DISK_PERCENT = "disk_percent", _("Disk %")

    PERCENTS: ClassVar[frozenset[str]]
    # Figures only a cluster provisioned here has (psutil on its processes and directory).
    HOST_ONLY: ClassVar[frozenset[str]]


AlertKind.PERCENTS = frozenset({AlertKind.CPU_PERCENT, AlertKind.CONNECTIONS_PERCENT, AlertKind.DISK_PERCENT})
AlertKind.HOST_ONLY = frozenset({AlertKind.CPU_PERCENT, AlertKind.DISK_PERCENT})


class AlertRule(models.Model):
    """Fire when ``kind`` stays at or above ``threshold`` for ``duration_seconds``; one per kind."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="alert_rules")
    kind = models.CharField(max_length=32, choices=AlertKind.choices)
    threshold = models.FloatField()
    duration_seconds = models.PositiveIntegerField(default=300)
    enabled = models.BooleanField(default=True)
    email = models.EmailField(blank=True, help_text=_("Empty: the cluster owner's address."))
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("kind",)
        constraints = [
            models.UniqueConstraint(fields=("cluster", "kind"), name="alertrule_one_per_kind"),
            models.CheckConstraint(condition=Q(threshold__gt=0), name="alertrule_threshold_positive"),
            models.CheckConstraint(
                condition=Q(duration_seconds__lte=86400), name="alertrule_duration_at_most_a_day"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} ≥ {self.threshold:g} for {self.duration_seconds} s"


class AlertState(models.Model):
    """Where a rule stands: condition true since when, firing since when, last email sent."""

    rule = models.OneToOneField(AlertRule, on_delete=models.CASCADE, related_name="state")
    pending_since = models.DateTimeField(null=True, blank=True)
    firing_since = models.DateTimeField(null=True, blank=True)
    last_notified_at = models.DateTimeField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=("firing_since",), name="alertstate_firing_idx")]

    def __str__(self) -> str:
        return f"{self.rule}: {'firing' if self.firing_since else 'ok'}"

    @property
    def is_firing(self) -> bool:
        return self.firing_since is not None


# --- statement statistics (pg_stat_statements): the Queries tab ----------------------------------


class StatementsStatus(models.TextChoices):
    COLLECTING = "collecting", _("Collecting")
    NOT_LOADED = "not_loaded", _("Restart needed")
    UNAVAILABLE = "unavailable", _("Unavailable")


class StatementsState(models.Model):
    """Where the collection of one cluster's statement statistics stands.

    ``checked_at`` is the collection the counters (``StatementCounter``) were last read at: the
    next one stores deltas from them only if nobody stored in between. ``stats_reset`` is the
    server's own time of the last reset (``pg_stat_statements_info``): when it changes, every
    counter counts from zero.
    """

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="statements_state")
    status = models.CharField(max_length=16, choices=StatementsStatus.choices)
    message = models.TextField(blank=True)
    checked_at = models.DateTimeField(null=True, blank=True)
    baseline_at = models.DateTimeField(null=True, blank=True)
    stats_reset = models.DateTimeField(null=True, blank=True)
    reset_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.status}"


class StatementFigures(models.Model):
    """What pg_stat_statements counts of one statement in one database as one role: a counter's
    last reading and a delta between two readings hold the same figures."""

    database = models.CharField(max_length=64, blank=True)
    role = models.CharField(max_length=64, blank=True)
    calls = models.BigIntegerField()
    total_ms = models.FloatField()
    sq_ms = models.FloatField()
    rows = models.BigIntegerField()
    blks_hit = models.BigIntegerField()
    blks_read = models.BigIntegerField()

    class Meta:
        abstract = True


class StatementCounter(StatementFigures):
    """The last reading of one statement of one database and role, for the next delta."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="statement_counters")
    queryid = models.BigIntegerField()
    dbid = models.BigIntegerField()
    userid = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=("cluster", "queryid", "dbid", "userid"), name="statementcounter_one_per_entry"
            )
        ]

    def __str__(self) -> str:
        return f"{self.queryid} {self.database}/{self.role}: {self.calls} calls"


class StatementText(models.Model):
    """A statement's normalised text, once per cluster and ``queryid``."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="statement_texts")
    queryid = models.BigIntegerField()
    text = models.TextField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("cluster", "queryid"), name="statementtext_one_per_query")
        ]

    def __str__(self) -> str:
        return f"{self.queryid}: {self.text[:60]}"


class StatementDelta(StatementFigures):
    """What one statement did between the previous collection and ``ts`` (in one database, as one
    role); each collection stores its top statements by time only. Kept 24 hours."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="statement_deltas")
    ts = models.DateTimeField()
    queryid = models.BigIntegerField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(calls__gt=0), name="statementdelta_calls_positive")]
        indexes = [
            # the tab: every statement of a cluster over a window; the detail: one statement's
            models.Index(fields=("cluster", "ts"), name="statementdelta_window_idx"),
            models.Index(fields=("cluster", "queryid", "ts"), name="statementdelta_query_idx"),
            models.Index(fields=("ts",), name="statementdelta_ts_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.queryid} {self.ts:%H:%M:%S}: {self.calls} calls"
