"""``/metrics``: the Prometheus endpoint, protected by a bearer token instead of a login; and the
Insights tab of a cluster: its page, the JSON of its charts, and its alert rules."""

from __future__ import annotations

import hmac
import uuid
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.gzip import gzip_page
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, PanelRequest, submit
from panel.insights import services
from panel.insights.charts import RESOLUTION_LABELS, chart_page_data, charts_for
from panel.insights.forms import DEFAULT_RANGE, RANGE_CHOICES, AlertRuleForm, Window, WindowForm, range_window
from panel.insights.lib.statements import SORTS
from panel.insights.models import AlertRule, MetricPoint, MetricRollup
from panel.insights.prometheus import exposition
from panel.insights.services import alerts
from panel.insights.services import queries as statement_services

StrOrPromise = str | Promise


def _bearer_token(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _sep, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return ""


def _unauthorized(message: str) -> HttpResponse:
    response = HttpResponse(message, status=401, content_type="text/plain")
    response["WWW-Authenticate"] = 'Bearer realm="pgpanel metrics"'
    return response


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if "token" in request.GET:
        # A token in the URL lands in access logs and proxies' logs: refused even when right, so
        # that a scraper configured that way is noticed at once.
        return _unauthorized(
            "The metrics token is accepted only in the Authorization header "
            "(Authorization: Bearer TOKEN), never in the URL. Move it there, and change the "
            "token (PANEL_METRICS_TOKEN) if it was logged.\n"
        )
    expected = settings.PANEL_METRICS_TOKEN
    given = _bearer_token(request)
    if not expected or not given or not hmac.compare_digest(given.encode(), expected.encode()):
        return _unauthorized("A valid metrics token is required (Authorization: Bearer TOKEN).\n")
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


# --- the Insights tab -------------------------------------------------------------------------------


def _window_of(request: HttpRequest) -> tuple[Window, WindowForm]:
    form = WindowForm(request.GET)
    return (form.window() if form.is_valid() else range_window(DEFAULT_RANGE)), form


def _has_data(cluster: Cluster) -> bool:
    return (
        MetricPoint.objects.filter(cluster=cluster).exists()
        or MetricRollup.objects.filter(cluster=cluster).exists()
    )


def _alerts_context(cluster: Cluster, form: AlertRuleForm, notice: str = "") -> dict[str, object]:
    rules = AlertRule.objects.filter(cluster=cluster).select_related("state")
    return {
        "cluster": cluster,
        "rules": [(rule, alerts.state_of(rule)) for rule in rules],
        "form": form,
        "notice": notice,
    }


@require_GET
def insights_tab(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    window, form = _window_of(request)
    charts = charts_for(cluster, window)
    context = {
        "cluster": cluster,
        "active_tab": "insights",
        "window": window,
        "window_errors": form.errors,
        "ranges": RANGE_CHOICES,
        "charts": charts,
        # A cluster from which nothing streams says so instead of drawing an empty lag chart.
        "replicates": any(chart.group == "replication" for chart in charts),
        "has_data": _has_data(cluster),
        "interval": services.interval(),
        "resolution_labels": RESOLUTION_LABELS,
        **_alerts_context(cluster, AlertRuleForm(cluster=cluster, initial=_edit_initial(request, cluster))),
    }
    return render(request, "insights/tab.html", context)


@never_cache
@gzip_page
@require_GET
def insights_data(request: HttpRequest, cluster_id: uuid.UUID) -> JsonResponse:
    """Every chart's series over the window, a few hundred points a line (``resolution_for``)."""
    cluster = get_cluster_for_user(request, cluster_id)
    form = WindowForm(request.GET)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors}, status=400)
    return JsonResponse(chart_page_data(cluster, form.window()))


def _edit_initial(request: HttpRequest, cluster: Cluster) -> dict[str, object] | None:
    rule = AlertRule.objects.filter(cluster=cluster, kind=request.GET.get("kind", "")).first()
    if rule is None:
        return None
    return {
        "kind": rule.kind,
        "threshold": f"{rule.threshold:g}",
        "duration_seconds": rule.duration_seconds,
        "email": rule.email,
        "enabled": rule.enabled,
    }


def _alerts_response(request: HttpRequest, context: dict[str, object]) -> HttpResponse:
    return render(request, "insights/tab.html#alerts", context)


@require_http_methods(["GET", "POST"])
def alert_rules(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """GET: the alerts card (``?kind=`` fills the form with that rule); POST: add or replace a rule."""
    cluster = get_cluster_for_user(request, cluster_id)
    if request.method == "GET":
        form = AlertRuleForm(cluster=cluster, initial=_edit_initial(request, cluster))
        return _alerts_response(request, _alerts_context(cluster, form))
    form = AlertRuleForm(request.POST, cluster=cluster)
    rule = submit(
        form,
        lambda data: services.save_rule(
            cluster,
            data["kind"],
            data["threshold"],
            data["duration_seconds"],
            enabled=data["enabled"],
            email=data["email"],
        ),
    )
    if rule is REFUSED:
        return _alerts_response(request, _alerts_context(cluster, form))
    return _alerts_changed(request, cluster, _("Alert “%(rule)s” saved.") % {"rule": rule.get_kind_display()})


@require_POST
def alert_rule_delete(request: PanelRequest, cluster_id: uuid.UUID, rule_id: int) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    rule = get_object_or_404(AlertRule, cluster=cluster, pk=rule_id)
    label = rule.get_kind_display()
    alerts.delete_rule(rule)
    return _alerts_changed(request, cluster, _("Alert “%(rule)s” deleted.") % {"rule": label})


def _alerts_changed(request: PanelRequest, cluster: Cluster, notice: str) -> HttpResponse:
    """After a rule is saved or deleted: the card with ``notice`` and an empty form under HTMX; a
    plain form's POST gets ``notice`` as a message and the tab again."""
    if not request.htmx:
        messages.success(request, notice)
        return redirect("insights:tab", cluster_id=cluster.pk)
    return _alerts_response(request, _alerts_context(cluster, AlertRuleForm(cluster=cluster), notice))


# --- the Queries tab ---------------------------------------------------------------------------------


def _queries_window(request: HttpRequest) -> tuple[statement_services.Window, bool]:
    """The window asked for: ``?window=`` (5m, 1h, 6h, 24h), or ``?start=&end=`` (ISO 8601, UTC
    when naive: a benchmark run's); False as second item when what was asked could not be read."""
    start, end = request.GET.get("start"), request.GET.get("end")
    if start or end:
        window = statement_services.window_between(start or "", end or "")
        if window is not None:
            return window, True
        return statement_services.window_of(None), False
    key = request.GET.get("window")
    return statement_services.window_of(key), key in (None, "", *statement_services.WINDOWS)


def _queries_context(request: HttpRequest, cluster: Cluster) -> dict[str, object]:
    window, window_ok = _queries_window(request)
    by = request.GET.get("by", "total")
    if by not in SORTS:
        by = "total"
    rows = statement_services.top_statements(cluster, window, by=by, limit=statement_services.TAB_ROWS)
    query = (
        {"window": window.key}
        if window.key
        else {"start": window.start.isoformat(), "end": window.end.isoformat()}
    )
    return {
        "cluster": cluster,
        "active_tab": "queries",
        "rows": rows,
        "window": window,
        "window_ok": window_ok,
        "window_query": urlencode(query),
        "windows": statement_services.WINDOW_CHOICES,
        "by": by,
        "sorts": statement_services.SORT_CHOICES,
        "state": statement_services.state_of(cluster),
        "interval": services.interval(),
    }


@require_GET
def queries_tab(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    context = _queries_context(request, cluster)
    template = "insights/queries.html#table" if request.htmx else "insights/queries.html"
    return render(request, template, context)


@require_POST
def queries_reset(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """Reset the cluster's statement statistics; the modal's form confirms with ``confirm=reset``."""
    cluster = get_cluster_for_user(request, cluster_id)
    if request.POST.get("confirm") != "reset":
        messages.error(request, _("Confirm the reset to clear the statistics."))
        return redirect("insights:queries", cluster_id=cluster.pk)
    try:
        statement_services.reset_statements(cluster)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Query statistics were reset."))
    return redirect("insights:queries", cluster_id=cluster.pk)


def _queryid(value: str) -> int:
    try:
        queryid = int(value)
    except ValueError:
        raise Http404("No such statement.") from None
    if not -(2**63) <= queryid < 2**63:
        raise Http404("No such statement.")
    return queryid


@require_GET
def query_detail(request: HttpRequest, cluster_id: uuid.UUID, queryid: str) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    qid = _queryid(queryid)
    text = statement_services.statement_text(cluster, qid)
    if text is None:
        raise Http404("No such statement.")
    context = _queries_context(request, cluster)
    window = context["window"]
    assert isinstance(window, statement_services.Window)
    context.update(
        {
            "queryid": qid,
            "text": text,
            "lines": statement_services.statement_rows(cluster, qid, window),
        }
    )
    return render(request, "insights/query_detail.html", context)


@never_cache
@require_GET
def query_data(request: HttpRequest, cluster_id: uuid.UUID, queryid: str) -> JsonResponse:
    """One statement's calls and mean time per collection over the window, for its chart."""
    cluster = get_cluster_for_user(request, cluster_id)
    window, _ok = _queries_window(request)
    points = statement_services.statement_series(cluster, _queryid(queryid), window)
    state = statement_services.state_of(cluster)
    # A window longer than the cluster's collections starts where they start, as on the Insights tab.
    start = max(window.start, state.baseline_at) if state and state.baseline_at else window.start
    return JsonResponse(
        {
            "start": int(start.timestamp() * 1000),
            "end": int(window.end.timestamp() * 1000),
            "points": points,
        }
    )
