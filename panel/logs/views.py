"""The Logs tab: a source's entries newest first with a level filter and a search, a live tail
(HTMX polls for what was written after the last entry shown), the download, and the slow-query
threshold. Each view: ownership lookup, form, one service call."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from panel.clusters.face import config, get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, add_service_error, go_to
from panel.logs import services
from panel.logs.forms import SLOW_QUERY_SETTING, LogFilterForm, SlowQueryForm

TAIL_SECONDS = 2


def _query(filters: dict[str, str], **more: str) -> str:
    values = {"source": filters["source"], "level": filters["level"], "q": filters["search"], **more}
    return urlencode({key: value for key, value in values.items() if value})


def _slow_context(cluster: Cluster, form: SlowQueryForm | None = None, saved: bool = False) -> dict[str, Any]:
    current = config.current_config(cluster)[SLOW_QUERY_SETTING]
    return {
        "slow_form": form or SlowQueryForm(initial={SLOW_QUERY_SETTING: current}),
        "slow_current": current,
        "slow_saved": saved,
    }


def _read(cluster: Cluster, filters: dict[str, str], after: str = "") -> tuple[services.LogPage | None, str]:
    try:
        return services.read_log(
            cluster, filters["source"], level=filters["level"], search=filters["search"], after=after
        ), ""
    except ServiceError as exc:
        return None, exc.message


@require_GET
def logs_tab(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = LogFilterForm(request.GET)
    filters = form.filters()
    page, error = _read(cluster, filters)
    context = {
        "cluster": cluster,
        "active_tab": "logs",
        "form": form,
        "filters": filters,
        "page": page,
        "entries": page.entries if page else [],
        "error": error,
        "tail_query": _query(filters, after=page.cursor) if page else "",
        "tail_seconds": TAIL_SECONDS,
        "sources": list(services.SOURCES.items()),
        "levels": services.LEVELS[filters["source"]],
        **_slow_context(cluster),
    }
    # The filter form swaps the results alone (with the level choices of the source, out of
    # band); anything else (a reload, a link) gets the page.
    results_only = request.htmx and request.htmx.target == "log-results"
    context["level_oob"] = results_only
    template = "logs/tab.html#results" if results_only else "logs/tab.html"
    return render(request, template, context)


@require_GET
def logs_tail(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The entries written after ``after`` (prepended to the list out of band) and the poller
    again with the new cursor; ``paused`` answers the poller without its trigger."""
    cluster = get_cluster_for_user(request, cluster_id)
    filters = LogFilterForm(request.GET).filters()
    after = request.GET.get("after", "")
    paused = request.GET.get("paused") == "1"
    page, error = (None, "") if paused else _read(cluster, filters, after=after)
    cursor = page.cursor if page and page.cursor else after
    context = {
        "cluster": cluster,
        "entries": page.entries if page else [],
        "page": page,
        "error": error,
        "paused": paused,
        "tail_skipped": bool(page and page.older_not_read and after),
        "tail_query": _query(filters, after=cursor),
        "tail_seconds": TAIL_SECONDS,
    }
    return render(request, "logs/tab.html#tail-response", context)


@require_GET
def logs_download(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    source = request.GET.get("source") or services.POSTGRES
    try:
        log = services.log_text(cluster, source)
    except ServiceError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    text = log.text
    if log.older_not_read:
        note = _("# Only the newest %(size)d MB of the log files; older lines are not included.") % {
            "size": services.DOWNLOAD_CAP_BYTES // (1024 * 1024)
        }
        text = f"{note}\n{text}"
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    name = f"{cluster.name}-{'postgresql' if source == services.POSTGRES else 'pgbouncer'}-{stamp}.log"
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response


@require_http_methods(["GET", "POST"])
def slow_queries(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The slow-query card: log_min_duration_statement through the configuration service (the
    Settings tab's Configuration card calls the same ``config.update_config``)."""
    cluster = get_cluster_for_user(request, cluster_id)
    form: SlowQueryForm | None  # None: the card without a form's errors
    form = SlowQueryForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            config.update_config(cluster, {SLOW_QUERY_SETTING: form.cleaned_data[SLOW_QUERY_SETTING]})
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            cluster.refresh_from_db(fields=["config"])
            if not request.htmx:
                return go_to(request, reverse("logs:tab", args=[cluster.pk]))
            context = {"cluster": cluster, **_slow_context(cluster, saved=True)}
            return render(request, "logs/tab.html#slow-card", context)
    if request.method == "GET":
        form = None
    # Invalid: the card again with the error next to the field (status 200, which htmx swaps).
    return render(request, "logs/tab.html#slow-card", {"cluster": cluster, **_slow_context(cluster, form)})
