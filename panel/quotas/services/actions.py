"""The user's actions on quotas: set or remove one, set the grace periods, allow writes for a
while. Each validates everything first and changes nothing on a refusal; a change takes effect
at once (a cycle runs) rather than at the next measurement."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from panel.clusters.face import transitions
from panel.clusters.models import Cluster, ClusterStatus, Database, DatabaseUser
from panel.core.errors import N_, Message, ServiceError
from panel.quotas.lib.quota import (
    QuotaInputError,
    check_limits,
    human_count,
    human_space,
    parse_count,
    parse_size,
)
from panel.quotas.models import Quota, QuotaKind, QuotaState
from panel.quotas.services.cycle import run_cycle, saved_storage_of

MAX_GRACE_SECONDS = 365 * 86400


def _size(value: object, field: str) -> int:
    try:
        return parse_size(value if isinstance(value, int) else str(value or "0"))
    except QuotaInputError as exc:
        raise ServiceError(exc.template, field, exc.code, exc.params) from None


def _count(value: object, field: str) -> int:
    try:
        return parse_count(value if isinstance(value, int) else str(value or "0"))
    except QuotaInputError as exc:
        raise ServiceError(exc.template, field, exc.code, exc.params) from None


def _check_target(cluster: Cluster, kind: str, name: str) -> None:
    if kind == QuotaKind.DATABASE:
        if not cluster.databases.filter(name=name).exists():
            raise Database.not_found(name, field="database")
    elif kind == QuotaKind.ROLE:
        if not cluster.users.filter(name=name).exists():
            raise DatabaseUser.not_found(name, field="role")
    else:
        raise ServiceError(
            N_("A quota is on a database or on a role."), field="kind", code="quota.kind_invalid", params={}
        )


def _refresh(cluster: Cluster) -> None:
    """Take the change into account now, when the server runs (else at its next cycle)."""
    if cluster.is_local and cluster.status == ClusterStatus.ONLINE:
        run_cycle(cluster)


def set_quota(
    cluster: Cluster,
    kind: str,
    name: str,
    *,
    space_soft: object = 0,
    space_hard: object = 0,
    files_soft: object = 0,
    files_hard: object = 0,
) -> Quota | None:
    """Set the limits of a database's or a role's quota (sizes as setquota takes them; 0 = no
    limit); all four 0 removes it. Returns the quota (None when removed)."""
    if not cluster.is_local:
        raise ServiceError(
            N_("Quotas are available for clusters provisioned by this panel."),
            code="quota.unsupported",
            params={},
        )
    _check_target(cluster, kind, name)
    limits = {
        "space_soft": _size(space_soft, "space_soft"),
        "space_hard": _size(space_hard, "space_hard"),
        "files_soft": _count(files_soft, "files_soft"),
        "files_hard": _count(files_hard, "files_hard"),
    }
    try:
        check_limits(limits["space_soft"], limits["space_hard"], what="space")
    except QuotaInputError as exc:
        raise ServiceError(exc.template, "space_soft", exc.code, exc.params) from None
    try:
        check_limits(limits["files_soft"], limits["files_hard"], what="relations")
    except QuotaInputError as exc:
        raise ServiceError(exc.template, "files_soft", exc.code, exc.params) from None
    if not any(limits.values()):
        remove_quota(cluster, kind, name)
        return None
    with transaction.atomic():
        quota, created = Quota.objects.update_or_create(
            cluster=cluster, kind=kind, name=name, defaults=limits
        )
    transitions.log_event(
        cluster,
        "quota-set",
        Message(
            N_(
                "Quota on %(kind)s “%(name)s”: space %(ss)s soft, %(sh)s hard; relations %(fs)s soft, %(fh)s hard."
            ),
            kind=quota.get_kind_display().lower(),
            name=name,
            ss=human_space(quota.space_soft),
            sh=human_space(quota.space_hard),
            fs=human_count(quota.files_soft),
            fh=human_count(quota.files_hard),
        ),
    )
    _refresh(cluster)
    quota.refresh_from_db()
    return quota


def remove_quota(cluster: Cluster, kind: str, name: str) -> bool:
    deleted, _rows = Quota.objects.filter(cluster=cluster, kind=kind, name=name).delete()
    if deleted:
        transitions.log_event(
            cluster,
            "quota-removed",
            Message(N_("Quota on %(kind)s “%(name)s” removed."), kind=kind, name=name),
        )
        _refresh(cluster)
    return bool(deleted)


def set_grace(cluster: Cluster, space_seconds: object, files_seconds: object | None = None) -> None:
    """The grace periods for the space and relations soft limits, in seconds (``setquota -t``)."""
    values = []
    for field, value in (
        ("space_grace", space_seconds),
        ("files_grace", space_seconds if files_seconds is None else files_seconds),
    ):
        try:
            seconds = int(str(value))
        except ValueError:
            raise ServiceError(
                N_("Give the grace period in seconds."), field=field, code="quota.bad_grace", params={}
            ) from None
        if not 0 <= seconds <= MAX_GRACE_SECONDS:
            raise ServiceError(
                N_("The grace period must be between 0 and %(max)s seconds."),
                field=field,
                code="quota.bad_grace",
                params={"max": MAX_GRACE_SECONDS},
            )
        values.append(seconds)
    storage = saved_storage_of(cluster)
    storage.space_grace_seconds, storage.files_grace_seconds = values
    storage.save(update_fields=["space_grace_seconds", "files_grace_seconds"])
    transitions.log_event(
        cluster,
        "quota-grace",
        Message(
            N_("Grace periods set to %(b)s s (space) and %(i)s s (relations)."), b=values[0], i=values[1]
        ),
    )
    _refresh(cluster)


def allow_writes(quota: Quota, now: dt.datetime | None = None) -> Quota:
    """ "Allow writes for 15 minutes" on an enforced quota, so its owner can clean up with room
    to spare; once per grace period (it comes back when usage was under the soft limit again)."""
    now = now or timezone.now()
    if quota.state != QuotaState.ENFORCED:
        raise ServiceError(N_("Writes are not stopped for this quota."), code="quota.not_enforced", params={})
    if not quota.allowance_left:
        raise ServiceError(
            N_(
                "Writes were already allowed once in this grace period; delete data to get back under the quota."
            ),
            code="quota.allowance_used",
            params={},
        )
    seconds = settings.PANEL_QUOTA_ALLOW_WRITES_SECONDS
    Quota.objects.filter(pk=quota.pk).update(
        writes_allowed_until=now + dt.timedelta(seconds=seconds), allowance_used_for=quota.over_since
    )
    transitions.log_event(
        quota.cluster,
        "quota-allowance",
        Message(
            N_("Writes allowed for %(m)s minutes on %(kind)s “%(name)s”."),
            m=seconds // 60,
            kind=quota.get_kind_display().lower(),
            name=quota.name,
        ),
    )
    _refresh(quota.cluster)
    quota.refresh_from_db()
    return quota
