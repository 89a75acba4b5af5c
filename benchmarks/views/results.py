"""Reading runs side by side: the comparison of picked runs, and a sweep's page and chart data."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from benchmarks import services
from benchmarks.models import BenchmarkRun
from benchmarks.services import pages
from benchmarks.views.common import get_sweep
from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, go_to

MAX_COMPARED = 8


def _picked_runs(request: PanelRequest, cluster: Cluster) -> list[BenchmarkRun]:
    ids: list[uuid.UUID] = []
    for value in request.GET.getlist("run")[:MAX_COMPARED]:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    return pages.picked_runs(request.user, cluster, ids)


@require_GET
def compare(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    runs = _picked_runs(request, cluster)
    context: dict[str, Any] = {"cluster": cluster, "active_tab": "benchmarks", "runs": runs}
    try:
        # The table only: the charts' samples come from compare_data.
        records = services.compare_records(runs)
    except ServiceError as exc:
        context["error"] = exc.message
    else:
        context["rows"] = list(zip(records, runs, strict=True))
        context["slowdowns"] = services.compare_slowdowns(runs)
    context["query"] = request.GET.urlencode()
    return render(request, "benchmarks/compare.html", context)


@require_GET
def compare_data(request: PanelRequest, cluster_id: uuid.UUID) -> JsonResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        comparison = services.compare_runs(_picked_runs(request, cluster))
    except ServiceError as exc:
        return JsonResponse({"error": exc.message}, status=400)
    return JsonResponse(comparison)


@require_GET
def sweep_detail(request: PanelRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> HttpResponse:
    sweep = get_sweep(request, cluster_id, sweep_id)
    template = "benchmarks/sweep_detail.html#runs" if request.htmx else "benchmarks/sweep_detail.html"
    return render(request, template, pages.sweep_page(sweep))


@never_cache
@require_GET
def sweep_data(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> JsonResponse:
    """The charts' data: one line per target or pool size, the best cell, the sentences."""
    sweep = get_sweep(request, cluster_id, sweep_id)
    results = services.sweep_results(sweep)
    return JsonResponse({**services.sweep_report(sweep), "targets": results})


@require_POST
def sweep_cancel(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> HttpResponse:
    sweep = get_sweep(request, cluster_id, sweep_id)
    try:
        cancelled = services.cancel_sweep(sweep)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.success(
            request,
            ngettext("%(n)s run cancelled.", "%(n)s runs cancelled.", cancelled) % {"n": cancelled},
        )
    url = reverse("benchmarks:sweep-detail", kwargs={"cluster_id": sweep.cluster_id, "sweep_id": sweep.pk})
    return go_to(request, url)
