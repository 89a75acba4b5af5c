"""One run: its live page, the samples its charts poll, cancel, and the exports."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from benchmarks import services
from benchmarks.services import pages
from benchmarks.views.common import get_run, int_param
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, go_to

SAMPLES_PAGE = 5000  # samples per answer of the data endpoint; the chart asks again for more
EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


@require_GET
def run_detail(request: PanelRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> HttpResponse:
    run = get_run(request, cluster_id, run_id)
    template = "benchmarks/run_detail.html#live" if request.htmx else "benchmarks/run_detail.html"
    response = render(request, template, pages.run_page(run))
    if request.htmx:
        response["Cache-Control"] = "no-store"
    return response


@never_cache
@require_GET
def run_samples(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> HttpResponse:
    """The run page's one poll: samples with ``seq > after`` for the charts, the status card's
    figures after the newest of them and the ``state`` token of the page's HTML part (re-fetched by
    the page only when it changes). While the run is live, ``?state=`` equal to the current token
    and no new sample answer 204, nothing new: watching a run must not cost the run its throughput."""
    run = get_run(request, cluster_id, run_id)
    samples = services.samples_after(run, int_param(request, "after"), limit=SAMPLES_PAGE)
    state = services.live_state(run)
    if not samples and not run.is_terminal and request.GET.get("state") == state:
        return HttpResponse(status=204)
    more = len(samples) == SAMPLES_PAGE
    body: dict[str, Any] = {
        "status": run.status,
        "terminal": run.is_terminal,
        "state": state,
        "duration_s": run.duration_s,
        "interval_s": run.options.get("progress_interval_s", 1),
        "percentiles": run.percentile_sampling_rate is not None,
        "samples": samples,
        "more": more,
    }
    if samples and not more and not run.is_terminal:
        body["figures"] = services.live_figures(run, samples[-1])
    return JsonResponse(body)


@require_POST
def run_cancel(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> HttpResponse:
    run = get_run(request, cluster_id, run_id)
    try:
        services.cancel_run(run)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.success(request, _("Run cancelled; the samples so far are kept."))
    url = reverse("benchmarks:run-detail", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    return go_to(request, url)


@require_GET
def run_export(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID, fmt: str) -> HttpResponse:
    run = get_run(request, cluster_id, run_id)
    if fmt not in EXPORT_TYPES:
        return HttpResponse(_("Unknown format."), status=404, content_type="text/plain; charset=utf-8")
    if not run.samples.exists():
        # Nothing to export: say so rather than hand over a file with a header and no rows.
        message = _("This run has no samples to export: it stopped before its first progress report.")
        return HttpResponse(message, status=404, content_type="text/plain; charset=utf-8")
    body = services.export_run(run, fmt)
    response = HttpResponse(body, content_type=EXPORT_TYPES[fmt])
    response["Content-Disposition"] = content_disposition_header(True, f"pgbench-run-{run.pk}.{fmt}")
    return response
