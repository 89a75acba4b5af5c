"""One quota cycle on a cluster: measure, judge every quota (and the plan's disk), record the
changes as events and alerts, and bring the server's write stops in line."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from panel.clusters import hooks
from panel.clusters.face import transitions
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.core.agent import on_node
from panel.core.errors import C_, N_, Message, Term
from panel.insights.face import alerts
from panel.insights.lib import metrics
from panel.insights.models import MetricPoint
from panel.quotas.lib.quota import Limit, State, human_space, judge, watermark
from panel.quotas.models import Quota, QuotaKind, QuotaState, Storage
from panel.quotas.services import blind, enforce, reserve
from panel.quotas.services.measure import Usage, measure

log = logging.getLogger(__name__)


def storage_of(cluster: Cluster) -> Storage:
    """The cluster's storage record to read: an unsaved one with the defaults (7-day grace
    periods, nothing measured) until a cycle or a grace change saves it, so pages never write."""
    return Storage.objects.filter(cluster=cluster).first() or Storage(cluster=cluster)


def saved_storage_of(cluster: Cluster) -> Storage:
    """The cluster's storage record to change (made on first use)."""
    return Storage.objects.get_or_create(cluster=cluster)[0]


def is_full(cluster: Cluster) -> bool:
    """Read-only for a full disk (the plan's, or the node's volume)."""
    return (
        Storage.objects.filter(cluster_id=cluster.pk)
        .filter(Q(disk_full_since__isnull=False) | Q(volume_full_since__isnull=False))
        .exists()
    )


def full_among(clusters: Iterable[Cluster]) -> set[Any]:
    """The primary keys of those of ``clusters`` that :func:`is_full` says are full, in one query."""
    return set(
        Storage.objects.filter(cluster_id__in=[cluster.pk for cluster in clusters])
        .filter(Q(disk_full_since__isnull=False) | Q(volume_full_since__isnull=False))
        .values_list("cluster_id", flat=True)
    )


def _ts(value: dt.datetime | None) -> float | None:
    return value.timestamp() if value else None


def _dt(value: float | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(value, tz=dt.UTC) if value is not None else None


def _usage_of(quota: Quota, usage: Usage) -> tuple[int, int]:
    if quota.kind == QuotaKind.DATABASE:
        return usage.database_bytes.get(quota.name, 0), usage.database_relations.get(quota.name, 0)
    return usage.role_bytes.get(quota.name, 0), usage.role_relations.get(quota.name, 0)


def _announce(cluster: Cluster, quota: Quota, old: str) -> str:
    """The event (and, past ok, the alert email) of a quota's change of state, each in its
    reader's language."""
    if quota.kind == QuotaKind.DATABASE:
        what = Message(N_("database “%(name)s”"), name=quota.name)
    else:
        what = Message(N_("role “%(name)s”"), name=quota.name)
    used = human_space(quota.space_used or 0)
    if quota.state == QuotaState.OVER_SOFT:
        message = Message(
            N_(
                "The %(what)s is over its soft storage limit (%(used)s used): writes stop when the grace "
                "period ends."
            ),
            what=what,
            used=used,
        )
        level = EventLevel.WARNING
    elif quota.state == QuotaState.ENFORCED:
        message = Message(
            N_(
                "Writes are stopped for the %(what)s (%(reason)s; %(used)s used). Reads, DELETE, TRUNCATE "
                "and DROP still work: delete data to get back under the quota."
            ),
            what=what,
            reason=quota.reason,
            used=used,
        )
        level = EventLevel.ERROR
    else:
        message = Message(
            N_("The %(what)s is back under its storage quota (%(used)s used); writes work again."),
            what=what,
            used=used,
        )
        level = EventLevel.INFO
    transitions.log_event(cluster, f"quota-{quota.state}".replace("_", "-"), message, level)
    if quota.state != QuotaState.OK or old == QuotaState.ENFORCED:
        transaction.on_commit(lambda: alerts.notify_owner(cluster, C_("alert", "Storage quota"), message))
    return f"{quota.kind} {quota.name}: {old} → {quota.state}"


def _alert(cluster: Cluster, kind: str, what: Term, message: Message, level: str) -> None:
    """An event on the cluster and, once the cycle's transaction commits, the owner's email."""
    transitions.log_event(cluster, kind, message, level)
    transaction.on_commit(lambda: alerts.notify_owner(cluster, what, message))


def _crossed(
    storage: Storage, since: str, percent: float, *, high: float, low: float, now: dt.datetime
) -> bool | None:
    """Move ``storage``'s mark ``since`` (when a watermark was crossed) with ``percent``: set to
    ``now`` from ``high`` on, cleared under ``low``; the new state as :func:`watermark` says."""
    crossed = watermark(getattr(storage, since) is not None, percent, high=high, low=low)
    if crossed is not None:
        setattr(storage, since, now if crossed else None)
    return crossed


def _full_or_back(
    cluster: Cluster, disk: str, full: bool | None, stopped: Message, back: Message
) -> list[str]:
    """The event (``disk-full``, ``volume-full``) and alert of ``disk`` (the plan's or the node's)
    becoming full, or the event of its being writable again (``disk-ok``, ``volume-ok``); the
    change as the cycle reports it."""
    if full:
        _alert(cluster, f"{disk}-full", C_("alert", "Disk full"), stopped, EventLevel.ERROR)
        return [f"{disk}: full"]
    if full is False:
        transitions.log_event(cluster, f"{disk}-ok", back)
        return [f"{disk}: ok"]
    return []


def _disk_full(cluster: Cluster, storage: Storage, used: int, now: dt.datetime) -> list[str]:
    """The plan's disk as the outer hard limit: read-only at the high watermark, writable again
    under the low one."""
    plan = cluster.plan
    if plan is None or not plan.disk_bytes:
        return []
    percent = 100.0 * used / plan.disk_bytes
    high, low = settings.PANEL_DISK_READONLY_PERCENT, settings.PANEL_DISK_WRITABLE_PERCENT
    full = _crossed(storage, "disk_full_since", percent, high=high, low=low, now=now)
    stopped = Message(
        N_(
            "The cluster's data (%(used)s) reached %(percent).0f%% of its plan's %(disk)s disk: every "
            "database is read-only until it is under %(low)s%%. Delete data or resize to a larger plan."
        ),
        used=human_space(used),
        percent=percent,
        disk=human_space(plan.disk_bytes),
        low=low,
    )
    back = Message(
        N_("The cluster's data is back to %(percent).0f%% of its disk; writes work again."), percent=percent
    )
    return _full_or_back(cluster, "disk", full, stopped, back)


def _volume(cluster: Cluster, storage: Storage, now: dt.datetime) -> list[str]:
    """The node's volume: a warning from the warn mark, every cluster on it read-only from the
    high watermark until it is under the low one."""
    percent = reserve.volume_percent(cluster.pgdata)
    storage.volume_percent = percent
    changes: list[str] = []
    warn = settings.PANEL_VOLUME_WARN_PERCENT
    high, low = settings.PANEL_VOLUME_READONLY_PERCENT, settings.PANEL_VOLUME_WRITABLE_PERCENT
    if _crossed(storage, "volume_warned_since", percent, high=warn, low=warn, now=now):
        message = Message(
            N_(
                "The node's disk is %(percent).0f%% full: at %(high)s%% every cluster on it becomes read-only."
            ),
            percent=percent,
            high=high,
        )
        _alert(cluster, "volume-warning", C_("alert", "Node disk"), message, EventLevel.WARNING)
        changes.append("volume: warning")
    full = _crossed(storage, "volume_full_since", percent, high=high, low=low, now=now)
    stopped = Message(
        N_(
            "The node's disk is %(percent).0f%% full: every database of this cluster is read-only until "
            "it is under %(low)s%%, before PostgreSQL would stop on a full disk. Delete data to make room."
        ),
        percent=percent,
        low=low,
    )
    back = Message(N_("The node's disk is back to %(percent).0f%%; writes work again."), percent=percent)
    return changes + _full_or_back(cluster, "volume", full, stopped, back)


def _record_metrics(cluster: Cluster, now: dt.datetime) -> None:
    """Each quota's usage and limits as Insights metrics (its "Storage quotas" charts; rolled up
    and pruned with the other metrics)."""
    points = []
    for quota in cluster.quotas.all():
        labels = metrics.label("quota", f"{quota.kind}:{quota.name}")
        values = {"quota_used_bytes": quota.space_used}
        if quota.space_soft:
            values["quota_soft_bytes"] = quota.space_soft
        if quota.space_hard:
            values["quota_hard_bytes"] = quota.space_hard
        points += [
            MetricPoint(cluster=cluster, metric=metric, labels=labels, ts=now, value=float(value))
            for metric, value in values.items()
            if value is not None
        ]
    MetricPoint.objects.bulk_create(points)


def write_stops(
    cluster: Cluster, storage: Storage, now: dt.datetime, every_database: list[str]
) -> tuple[list[str], list[str]]:
    """The databases and roles whose writes must be stopped now (an allowance running excepted);
    a full disk stops ``every_database`` the server has, those made with SQL too."""
    databases: set[str] = set()
    owners: set[str] = set()
    for quota in cluster.quotas.filter(state=QuotaState.ENFORCED):
        if quota.writes_allowed_at(now):
            continue
        (databases if quota.kind == QuotaKind.DATABASE else owners).add(quota.name)
    if storage.is_full:
        databases |= set(every_database)
    return sorted(databases), sorted(owners)


@on_node(timeout=60)
def run_cycle(cluster: Cluster, now: dt.datetime | None = None) -> list[str]:
    """Measure ``cluster``, move each quota along ok → over soft → enforced → ok, stop or
    restart writes accordingly; returns the changes (empty when none). A cluster that is not
    serving is left as it is."""
    if not cluster.is_local or cluster.status != ClusterStatus.ONLINE:
        return []
    now = now or timezone.now()
    storage = saved_storage_of(cluster)
    usage = measure(cluster)
    changes: list[str] = []
    with transaction.atomic():
        for quota in Quota.objects.select_for_update().filter(cluster=cluster):
            quota.space_used, quota.files_used = blind.fail_closed(quota, _usage_of(quota, usage), usage)
            quota.measured_at = now
            verdict = judge(
                Limit(quota.space_used, quota.space_soft, quota.space_hard),
                Limit(quota.files_used, quota.files_soft, quota.files_hard),
                over_since=_ts(quota.over_since),
                now=now.timestamp(),
                space_grace=storage.space_grace_seconds,
                files_grace=storage.files_grace_seconds,
            )
            old = quota.state
            quota.state = QuotaState(verdict.state.value)
            quota.over_since = _dt(verdict.over_since)
            quota.reason = verdict.reason
            if verdict.state is State.ENFORCED and old != QuotaState.ENFORCED:
                quota.enforced_since = now
            elif verdict.state is not State.ENFORCED:
                quota.enforced_since = None
            if verdict.state is State.OK:
                quota.writes_allowed_until = None
            quota.save()
            if quota.state != old:
                changes.append(_announce(cluster, quota, old))
        changes += blind.record(cluster, storage, usage)
        # The plan's disk holds the data directory (WAL included) and the backup repository.
        disk_bytes = usage.data_dir_bytes + hooks.disk_usage(cluster)
        changes += _disk_full(cluster, storage, disk_bytes, now)
        changes += _volume(cluster, storage, now)
        storage.data_dir_bytes = disk_bytes
        storage.measured_at = now
        storage.measure_ms = usage.database_ms
        _record_metrics(cluster, now)
        stopped_databases, stopped_owners = write_stops(cluster, storage, now, list(usage.database_bytes))
        applied = json.dumps([stopped_databases, stopped_owners])
        newly_databases = sorted(set(stopped_databases) - set(_applied(storage)[0]))
        newly_owners = sorted(set(stopped_owners) - set(_applied(storage)[1]))
        storage.applied = applied
        storage.save()
    enforce.write_and_reload(cluster, stopped_databases, stopped_owners)
    ended = enforce.end_writers(cluster, newly_databases, newly_owners)
    if ended:
        transitions.log_event(
            cluster,
            "quota-sessions-ended",
            Message(N_("%(n)s sessions in a write transaction were ended when writes stopped."), n=ended),
            EventLevel.WARNING,
        )
    return changes


def _applied(storage: Storage) -> tuple[list[str], list[str]]:
    """What the server was last told to stop (names as JSON: a tenant's names may hold any
    character), to end the writers of what is newly stopped only."""
    try:
        databases, owners = json.loads(storage.applied or "[[], []]")
    except (ValueError, TypeError):
        return [], []
    return list(databases), list(owners)


def run_all() -> dict[str, list[str]]:
    """Every cycle of this node's online clusters; a cluster that fails is logged and skipped."""
    results: dict[str, list[str]] = {}
    try:
        reserve.ensure()
    except OSError as exc:
        log.warning("quotas: the emergency reserve could not be made: %s", exc)
    for cluster in Cluster.objects.here().filter(status=ClusterStatus.ONLINE):
        try:
            results[cluster.name] = run_cycle(cluster)
        except Exception as exc:  # one cluster's failure must not stop the others' quotas
            log.warning("quotas: %s not measured: %s", cluster.pk, exc)
            results[cluster.name] = [f"error: {exc}", *blind.record_unmeasured(cluster, exc)]
    return results
