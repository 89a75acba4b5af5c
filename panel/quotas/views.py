"""The Quotas tab: repquota's report with bars, the forms that set quotas and grace periods, the
"allow writes" action and the CSV export. Each view: ownership lookup, form, one service call."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_GET, require_POST

from panel.clusters.face import get_cluster_for_user, number
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, PanelRequest, add_service_error, submit
from panel.quotas import services
from panel.quotas.forms import GraceForm, QuotaForm
from panel.quotas.lib.quota import human_count, human_space
from panel.quotas.models import Quota, QuotaKind, QuotaState

# What saving a quota leads to, by the state its usage puts it in (it said "saved: OK").
SAVED = {
    QuotaState.OK: gettext_lazy("The quota on “%(name)s” is saved; its usage is within the limits."),
    QuotaState.OVER_SOFT: gettext_lazy(
        "The quota on “%(name)s” is saved; its usage is over the soft limit, so writes stop when the "
        "grace period ends unless it shrinks."
    ),
    QuotaState.ENFORCED: gettext_lazy(
        "The quota on “%(name)s” is saved; its usage is over the limit, so writes are stopped until "
        "data is deleted or the limit raised."
    ),
}


def duration(seconds: float) -> str:
    """A period in words of the page's language: days from two days on, else hours and minutes
    (setquota's "7days" and "06:30" were its jargon)."""
    minutes = (int(seconds) + 30) // 60
    hours, minutes = divmod(minutes, 60)
    if hours >= 48:
        days = (hours + 12) // 24
        return ngettext("%(count)s day", "%(count)s days", days) % {"count": number(days)}
    parts = [ngettext("%(count)s hour", "%(count)s hours", hours) % {"count": hours}] if hours else []
    if minutes or not hours:
        parts.append(ngettext("%(count)s minute", "%(count)s minutes", minutes) % {"count": minutes})
    return " ".join(parts)


def _grace_left(shown: str, over_since: dt.datetime | None, grace: int, now: dt.datetime) -> str:
    """What is left of a running grace period ("" when none runs), in words."""
    if not shown or over_since is None:
        return ""
    left = (over_since - now).total_seconds() + grace
    return duration(left) if left > 0 else _("ran out")


def _shown(row: services.Row, storage: Any, now: dt.datetime) -> dict[str, Any]:
    """A report row with repquota -s's human sizes and the grace left in words, for the tab."""
    quota = row.quota
    return {
        "quota": quota,
        "flags": row.flags,
        "space_used": human_space(quota.space_used) if quota.space_used is not None else "—",
        "space_soft": human_space(quota.space_soft),
        "space_hard": human_space(quota.space_hard),
        "space_grace": _grace_left(row.space_grace, quota.over_since, storage.space_grace_seconds, now),
        "files_used": human_count(quota.files_used, number) if quota.files_used is not None else "—",
        "files_soft": human_count(quota.files_soft, number),
        "files_hard": human_count(quota.files_hard, number),
        "files_grace": _grace_left(row.files_grace, quota.over_since, storage.files_grace_seconds, now),
        "allowance_left": quota.allowance_left,
        "writes_allowed": quota.writes_allowed_at(now),
    }


def render_tab(
    request: PanelRequest,
    cluster: Cluster,
    *,
    quota_form: QuotaForm | None = None,
    grace_form: GraceForm | None = None,
    notice: str = "",
) -> HttpResponse:
    storage = services.storage_of(cluster)
    now = timezone.now()
    plan = cluster.plan
    disk_percent = (
        min(100.0, 100.0 * storage.data_dir_bytes / plan.disk_bytes)
        if plan and plan.disk_bytes and storage.data_dir_bytes is not None
        else None
    )
    context = {
        "cluster": cluster,
        "active_tab": "quotas",
        "storage": storage,
        "plan": plan,
        "disk_percent": disk_percent,
        "data_dir_human": human_space(storage.data_dir_bytes) if storage.data_dir_bytes is not None else None,
        "space_grace_text": duration(storage.space_grace_seconds),
        "files_grace_text": duration(storage.files_grace_seconds),
        "database_rows": [
            _shown(row, storage, now) for row in services.rows(cluster, QuotaKind.DATABASE, storage=storage)
        ],
        "role_rows": [
            _shown(row, storage, now) for row in services.rows(cluster, QuotaKind.ROLE, storage=storage)
        ],
        "databases": list(cluster.databases.values_list("name", flat=True)),
        "users": list(cluster.users.values_list("name", flat=True)),
        "quota_form": quota_form or QuotaForm(),
        "grace_form": grace_form
        or GraceForm(
            initial={"space_grace": storage.space_grace_seconds, "files_grace": storage.files_grace_seconds}
        ),
        "notice": notice,
    }
    template = "quotas/tab.html#tab" if request.htmx else "quotas/tab.html"
    return render(request, template, context)


@require_GET
def quota_tab(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return render_tab(request, get_cluster_for_user(request, cluster_id))


@require_POST
def quota_set(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = QuotaForm(request.POST)
    if not form.is_valid():
        return render_tab(request, cluster, quota_form=form)
    data = form.cleaned_data
    try:
        quota = services.set_quota(
            cluster,
            data["kind"],
            data["name"],
            space_soft=data["space_soft"],
            space_hard=data["space_hard"],
            files_soft=data["files_soft"],
            files_hard=data["files_hard"],
        )
    except ServiceError as exc:
        if exc.field in ("database", "role"):
            exc.field = "name"
        add_service_error(form, exc)
        return render_tab(request, cluster, quota_form=form)
    if quota is None:
        notice = _("The quota on “%(name)s” was removed (every limit 0).") % {"name": data["name"]}
    else:
        notice = SAVED[QuotaState(quota.state)] % {"name": quota.name}
    return render_tab(request, cluster, notice=notice)


@require_POST
def quota_remove(request: PanelRequest, cluster_id: uuid.UUID, quota_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    quota = get_object_or_404(Quota, cluster=cluster, pk=quota_id)
    services.remove_quota(cluster, quota.kind, quota.name)
    return render_tab(request, cluster, notice=_("Quota on “%(name)s” removed.") % {"name": quota.name})


@require_POST
def quota_allow_writes(request: PanelRequest, cluster_id: uuid.UUID, quota_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    quota = get_object_or_404(Quota, cluster=cluster, pk=quota_id)
    try:
        quota = services.allow_writes(quota)
    except ServiceError as exc:
        return render_tab(request, cluster, notice=exc.message)
    return render_tab(
        request,
        cluster,
        notice=_("Writes allowed on “%(name)s” until %(until)s UTC.")
        % {"name": quota.name, "until": f"{quota.writes_allowed_until:%H:%M}"},
    )


@require_POST
def quota_grace(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = GraceForm(request.POST)
    if (
        submit(form, lambda data: services.set_grace(cluster, data["space_grace"], data["files_grace"]))
        is REFUSED
    ):
        return render_tab(request, cluster, grace_form=form)
    return render_tab(request, cluster, notice=_("Grace periods saved."))


@require_GET
def quota_csv(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    response = HttpResponse(services.report_csv(cluster), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=f"{cluster.name}-quotas.csv"
    )
    return response
