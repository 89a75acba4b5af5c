"""The Backups tab: the repository's backups, the recovery window, "Back up now" with its
progress, and the restore/fork form. Each view: ownership lookup, form, one service call."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from panel.backups.forms import BackupNowForm, RestoreForm, limits
from panel.backups.lib import pgbackrest
from panel.backups.models import JobStatus
from panel.backups.services import archiving, backups, restore
from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, PanelRequest, go_to, submit


def render_tab(
    request: PanelRequest,
    cluster: Cluster,
    *,
    restore_form: RestoreForm | None = None,
    notice: str = "",
) -> HttpResponse:
    overview = backups.page(cluster) if cluster.is_local and cluster.is_serving else None
    if overview is not None and overview.archive is not None:
        archiving.record_health(cluster, overview.archive)
    jobs = list(cluster.backup_jobs.all()[:10])
    # A restore's new cluster, linked from its job once it exists.
    names = [job.target_name for job in jobs if job.target_name]
    made = dict(Cluster.objects.filter(owner=cluster.owner, name__in=names).values_list("name", "pk"))
    for job in jobs:
        job.target_pk = made.get(job.target_name)  # type: ignore[attr-defined]
    running = any(job.status in (JobStatus.QUEUED, JobStatus.RUNNING) for job in jobs)
    form = restore_form or RestoreForm(initial={"plan": cluster.plan_slug, "point": "latest"})
    if overview is not None:
        form.fields["time"].widget.attrs.update(limits(overview.window_start, overview.window_end))
    context = {
        "cluster": cluster,
        "active_tab": "backups",
        "overview": overview,
        "jobs": jobs,
        "running": running,
        "schedule": backups.schedule_text(),
        "retention_days": pgbackrest.RETENTION_DAYS,
        "backup_form": BackupNowForm(),
        "restore_form": form,
        "notice": notice,
    }
    template = "backups/tab.html#tab" if request.htmx else "backups/tab.html"
    return render(request, template, context)


@require_GET
def backups_tab(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return render_tab(request, get_cluster_for_user(request, cluster_id))


@require_POST
def backup_now(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = BackupNowForm(request.POST)
    if not form.is_valid():
        return render_tab(request, cluster, notice=_("Choose a backup type."))
    try:
        backups.request_backup(cluster, form.cleaned_data["backup_type"])
    except ServiceError as exc:
        return render_tab(request, cluster, notice=exc.message)
    return render_tab(request, cluster, notice=_("Backup queued."))


@require_POST
def restore_view(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = RestoreForm(request.POST)
    new = submit(
        form,
        lambda data: restore.request_restore(
            cluster, cluster.owner, name=data["name"], target_time=data["time"], plan_slug=data["plan"]
        ),
    )
    if new is REFUSED:
        return render_tab(request, cluster, restore_form=form)
    # The source's tab follows the restore job (its progress, then a link or the reason it failed):
    # a restore that fails leaves no new cluster to look at.
    notice = _("Restoring into “%(name)s”; it is listed below and opens when it is online.") % {
        "name": new.name
    }
    messages.info(request, notice)
    return go_to(request, reverse("backups:tab", args=[cluster.pk]))
