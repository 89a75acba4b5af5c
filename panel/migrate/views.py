"""The Migration page of a cluster: the form that starts an online migration, then its status
(polled while it runs) with the stop / cut-over button. Each view: ownership lookup, form, one
service call."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, add_service_error, go_to
from panel.migrate.forms import MigrationForm
from panel.migrate.services import actions, cutover

POLL_SECONDS = 2


def _context(cluster: Cluster, form: MigrationForm | None = None, error: str = "") -> dict[str, object]:
    try:
        state = cutover.migration_status(cluster)
    except ServiceError as exc:
        state, error = None, error or exc.message
    return {
        "cluster": cluster,
        "active_tab": "migration",
        "state": state,
        "active": bool(state and state.status in ("running", "syncing")),
        "form": form or MigrationForm(),
        "error": error,
        "poll_seconds": POLL_SECONDS,
    }


@require_http_methods(["GET", "POST"])
def migration_tab(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form: MigrationForm | None  # None: the card without a form's errors
    form = MigrationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            actions.start_migration(
                cluster,
                host=data["host"],
                port=data["port"],
                dbname=data["dbname"],
                username=data["username"],
                password=data["password"],
                disable_ssl=data["disable_ssl"],
                ignore_dbs=data["ignore_dbs"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            return go_to(request, reverse("migrate:tab", args=[cluster.pk]))
    if request.method == "GET":
        form = None
    template = "migrate/tab.html#card" if request.htmx else "migrate/tab.html"
    return render(request, template, _context(cluster, form))


@require_GET
def migration_status(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return render(request, "migrate/tab.html#card", _context(cluster))


@require_POST
def migration_stop(request: HttpRequest, cluster_id: uuid.UUID, migration_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        cutover.stop_migration(cluster, str(migration_id))
    except ServiceError as exc:
        return render(request, "migrate/tab.html#card", _context(cluster, error=exc.message))
    return go_to(request, reverse("migrate:tab", args=[cluster.pk]))
