"""The per-cluster Prometheus scrape endpoint (HTTP basic auth with the account's metrics
credentials, no login), and the Settings tab's maintenance, tags and storage autoscale cards
(HTMX partials, through the service functions the API calls)."""

from __future__ import annotations

import base64
import binascii
import uuid

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from panel.clusters.face import get_cluster_for_user
from panel.core.errors import ServiceError
from panel.core.web import add_service_error
from panel.managed.forms import AutoscaleForm, MaintenanceWindowForm, TagsForm
from panel.managed.services import autoscale, maintenance, metrics, tags


def _basic_auth(request: HttpRequest) -> tuple[str, str] | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        username, sep, password = base64.b64decode(value, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (username, password) if sep else None


def _refused() -> HttpResponse:
    response = HttpResponse("Metrics credentials required (HTTP basic auth).\n", status=401)
    response["WWW-Authenticate"] = 'Basic realm="pgpanel metrics"'
    response["Content-Type"] = "text/plain; charset=utf-8"
    return response


@login_not_required
@require_GET
def scrape(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """Another account's cluster answers as one that does not exist: 404 (no figures, no hint)."""
    pair = _basic_auth(request)
    account = metrics.account_for(*pair) if pair else None
    if account is None:
        return _refused()
    body = metrics.scrape(account, cluster_id)
    if body is None:
        return HttpResponse("No such cluster.\n", status=404, content_type="text/plain; charset=utf-8")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


@require_http_methods(["GET", "POST"])
def maintenance_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The window and what is pending, as the node last reported (``?check=1``: asked again);
    POST sets the window (an invalid form comes back in the card, status 200)."""
    cluster = get_cluster_for_user(request, cluster_id)
    row = maintenance.window_of(cluster)
    problem = ""
    form = MaintenanceWindowForm(initial={"day": row.day, "hour": row.hour})
    if request.method == "POST":
        form = MaintenanceWindowForm(request.POST)
        if form.is_valid():
            try:
                row = maintenance.set_window(
                    cluster, form.cleaned_data["day"], str(form.cleaned_data["hour"])
                )
            except ServiceError as exc:
                add_service_error(form, exc)
    elif request.GET.get("check") and cluster.is_local:
        try:
            maintenance.check_updates(cluster)
        except ServiceError as exc:
            problem = exc.message
        row.refresh_from_db()
    context = {
        "cluster": cluster,
        "window": row,
        "pending": maintenance.pending(row),
        "problem": problem,
        "form": form,
    }
    return render(request, "managed/_maintenance.html", context)


@require_http_methods(["GET", "POST"])
def tags_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The cluster's tags (the API's ``tags``); POST replaces them."""
    cluster = get_cluster_for_user(request, cluster_id)
    form = TagsForm(initial={"tags": " ".join(tags.tags_of(cluster))})
    notice = ""
    if request.method == "POST":
        form = TagsForm(request.POST)
        if form.is_valid():
            try:
                tags.set_tags(cluster, form.cleaned_data["tags"])
            except ServiceError as exc:
                add_service_error(form, exc)
            else:
                notice = _("Tags saved.")
                form = TagsForm(initial={"tags": " ".join(tags.tags_of(cluster))})
    context = {"cluster": cluster, "form": form, "tags": tags.tags_of(cluster), "notice": notice}
    return render(request, "managed/_tags.html", context)


@require_http_methods(["GET", "POST"])
def autoscale_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """Storage autoscale (the API's ``autoscale.storage``); POST sets it."""
    cluster = get_cluster_for_user(request, cluster_id)
    row = autoscale.autoscale_of(cluster)
    initial = {
        "enabled": row.enabled,
        "threshold_percent": row.threshold_percent,
        "increment_gib": row.increment_gib,
    }
    form = AutoscaleForm(initial=initial)
    notice = ""
    if request.method == "POST":
        form = AutoscaleForm(request.POST)
        if form.is_valid():
            try:
                row = autoscale.set_autoscale(cluster, **form.cleaned_data)
            except ServiceError as exc:
                add_service_error(form, exc)
            else:
                notice = _("Storage autoscale saved.")
    context = {"cluster": cluster, "form": form, "autoscale": row, "notice": notice}
    return render(request, "managed/_autoscale.html", context)
