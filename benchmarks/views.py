"""Benchmarks tab, run, compare and sweep pages. Each view fetches the cluster through the clusters'
ownership helper (runs and sweeps through the clusters the user may see: 404 for anyone else),
validates a form, calls one service function and returns a redirect, a page, an HTMX partial or
JSON for the charts."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop as N_
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from benchmarks import services
from benchmarks.failure import explain_failure, kind_label
from benchmarks.forms import InitDataSetForm, RunForm, SweepForm
from benchmarks.models import BenchmarkRun, DataSet, JobStatus, RunStatus, Sweep
from panel.clusters.models import Cluster
from panel.clusters.ownership import clusters_for, get_cluster_for_user
from panel.core.errors import ServiceError
from panel.core.web import add_service_error

HISTORY_LIMIT = 50
MAX_COMPARED = 8
SAMPLES_PAGE = 5000  # samples per answer of the data endpoint; the chart asks again for more
EXPORT_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json"}
# Summary fields in reading order; any other field of run.summary follows under its own name.
SUMMARY_LABELS = {
    "tps": N_("TPS"),
    "latency_avg_ms": N_("Latency average (ms)"),
    "latency_stddev_ms": N_("Latency stddev (ms)"),
    "transactions_processed": N_("Transactions processed"),
    "transactions_expected": N_("Transactions expected"),
    "failed_transactions": N_("Failed transactions"),
    "failed_percent": N_("Failed (%)"),
    "initial_connection_time_ms": N_("Initial connection time (ms)"),
    "average_connection_time_ms": N_("Average connection time (ms)"),
    "clients": N_("Clients"),
    "threads": N_("Threads"),
    "duration_s": N_("Duration (s)"),
    "transactions_per_client": N_("Transactions per client"),
    "transaction_type": N_("Transaction type"),
    "query_mode": N_("Query mode"),
    "scaling_factor": N_("Scaling factor"),
    "max_tries": N_("Maximum tries"),
    "serialization_failures": N_("Serialization failures"),
    "deadlock_failures": N_("Deadlock failures"),
    "retried_transactions": N_("Retried transactions"),
    "retried_percent": N_("Retried (%)"),
    "total_retries": N_("Total retries"),
    "skipped_transactions": N_("Skipped transactions"),
    "skipped_percent": N_("Skipped (%)"),
    "latency_limit_ms": N_("Latency limit (ms)"),
    "late_transactions": N_("Late transactions"),
    "late_percent": N_("Late (%)"),
    "schedule_lag_avg_ms": N_("Schedule lag average (ms)"),
    "schedule_lag_max_ms": N_("Schedule lag max (ms)"),
    "latency_includes_failures": N_("Latency includes failures"),
    "tps_includes_connections": N_("TPS includes reconnections"),
    "aborted": N_("Run aborted"),
    "partition_method": N_("Partition method"),
    "partitions": N_("Partitions"),
    "pgbench_version": N_("pgbench version"),
    "server_version": N_("Server version"),
}


def _runs_for(request: HttpRequest) -> QuerySet[BenchmarkRun]:
    return BenchmarkRun.objects.filter(cluster__in=clusters_for(request.user))


def _get_run(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> BenchmarkRun:
    """The run if its cluster is the one in the URL and the user may see it; a 404 otherwise."""
    runs = _runs_for(request).select_related("cluster")
    return get_object_or_404(runs, pk=run_id, cluster_id=cluster_id)


def _get_sweep(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> Sweep:
    sweeps = Sweep.objects.filter(cluster__in=clusters_for(request.user)).select_related("cluster")
    return get_object_or_404(sweeps, pk=sweep_id, cluster_id=cluster_id)


def _int_param(request: HttpRequest, name: str) -> int:
    try:
        return max(0, int(request.GET.get(name, 0)))
    except ValueError:
        return 0


# --- the tab: data sets, run form, history ---------------------------------------------------------


def _datasets(cluster: Cluster) -> list[dict[str, Any]]:
    """Per database: the newest data set (maybe still loading or failed) and the newest usable one."""
    rows: dict[str, dict[str, Any]] = {}
    for dataset in DataSet.objects.filter(cluster=cluster).order_by("-created_at")[:200]:
        row = rows.setdefault(
            dataset.database, {"database": dataset.database, "latest": dataset, "ready": None}
        )
        if row["ready"] is None and dataset.status == JobStatus.SUCCEEDED:
            row["ready"] = dataset
    return sorted(rows.values(), key=lambda row: row["database"])


def _datasets_live_context(cluster: Cluster) -> dict[str, Any]:
    datasets = _datasets(cluster)
    return {
        "cluster": cluster,
        "datasets": datasets,
        "datasets_busy": any(not row["latest"].is_terminal for row in datasets),
    }


def _datasets_context(cluster: Cluster, form: InitDataSetForm | None = None) -> dict[str, Any]:
    return {**_datasets_live_context(cluster), "init_form": form or InitDataSetForm(cluster=cluster)}


def _history_context(cluster: Cluster) -> dict[str, Any]:
    runs = list(cluster.benchmark_runs.order_by("-created_at")[:HISTORY_LIMIT])
    return {
        "cluster": cluster,
        "runs": runs,
        "runs_active": any(run.status in RunStatus.ACTIVE for run in runs),
        "sweeps": list(cluster.sweeps.order_by("-created_at")[:10]),
    }


def _render_tab(
    request: HttpRequest,
    cluster: Cluster,
    *,
    run_form: RunForm | None = None,
    init_form: InitDataSetForm | None = None,
    sweep_form: SweepForm | None = None,
) -> HttpResponse:
    context: dict[str, Any] = {
        "active_tab": "benchmarks",
        "run_form": run_form or RunForm(cluster=cluster),
        "sweep_form": sweep_form or SweepForm(cluster=cluster),
        "sweep_open": bool(sweep_form is not None and sweep_form.errors),
        **_datasets_context(cluster, init_form),
        **_history_context(cluster),
    }
    return render(request, "benchmarks/tab.html", context)


@require_GET
def tab(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return _render_tab(request, cluster)


@never_cache
@require_GET
def datasets(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The data sets card, polled every second while one is being initialised."""
    cluster = get_cluster_for_user(request, cluster_id)
    # Polled every second: no init form (and its database query) for a fragment that does not show it.
    return render(request, "benchmarks/tab.html#datasets-live", _datasets_live_context(cluster))


@require_http_methods(["GET", "POST"])
def dataset_init(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    if request.method == "GET":
        return redirect("benchmarks:tab", cluster_id=cluster.pk)
    form = InitDataSetForm(request.POST, cluster=cluster)
    if form.is_valid():
        data = form.cleaned_data
        try:
            services.init_dataset(
                cluster, data["database"], data["scale"], data["init_steps"], data["foreign_keys"]
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            if not request.htmx:
                return redirect("benchmarks:tab", cluster_id=cluster.pk)
            form = None
    if request.htmx:
        return render(request, "benchmarks/tab.html#datasets", _datasets_context(cluster, form))
    return _render_tab(request, cluster, init_form=form)


@never_cache
@require_GET
def history(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The runs table, polled every 2 s while a run is queued or running."""
    cluster = get_cluster_for_user(request, cluster_id)
    return render(request, "benchmarks/tab.html#history", _history_context(cluster))


@require_POST
def run_check(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The warnings of the run form as filled so far: shown before launch, never blocking."""
    cluster = get_cluster_for_user(request, cluster_id)
    form = RunForm(request.POST, cluster=cluster)
    warnings = services.preview_warnings(cluster, **form.service_kwargs()) if form.is_valid() else []
    return render(request, "benchmarks/tab.html#warnings", {"warnings": warnings, "checked": True})


@require_http_methods(["GET", "POST"])
def run_launch(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    if request.method == "GET":
        return redirect("benchmarks:tab", cluster_id=cluster.pk)
    form = RunForm(request.POST, cluster=cluster)
    if form.is_valid():
        try:
            run = services.launch_run(
                cluster,
                label=form.cleaned_data["label"],
                percentiles=form.cleaned_data["percentiles"],
                **form.service_kwargs(),
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            url = reverse("benchmarks:run-detail", kwargs={"cluster_id": cluster.pk, "run_id": run.pk})
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    if request.htmx:
        context = {"cluster": cluster, "run_form": form}
        return render(request, "benchmarks/tab.html#run-form", context)
    return _render_tab(request, cluster, run_form=form)


# --- one run: live page, samples, cancel, export ---------------------------------------------------


# Summary values that only say a feature was not used: such a row does not apply to the run.
NOT_APPLICABLE = {
    "max_tries": 1,
    "latency_includes_failures": False,
    "tps_includes_connections": False,
    "aborted": False,
}


def _applies(key: str, value: Any) -> bool:
    """Whether a summary row says something about this run: pgbench leaves the figures of options
    it did not use (rate, latency limit, retries, partitions…) empty, and those rows are left out."""
    if value is None or value == "" or value == []:
        return False
    return key not in NOT_APPLICABLE or value != NOT_APPLICABLE[key]


def _summary_rows(summary: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if not summary:
        return []
    rows = [
        (_(label), summary[key])
        for key, label in SUMMARY_LABELS.items()
        if key in summary and _applies(key, summary[key])
    ]
    rows += [
        (key.replace("_", " ").capitalize(), value)
        for key, value in summary.items()
        if key not in SUMMARY_LABELS and key != "statement_latencies" and _applies(key, value)
    ]
    return rows


def _run_context(run: BenchmarkRun) -> dict[str, Any]:
    latest = run.samples.order_by("-seq").first()
    progress = None
    elapsed = latest.elapsed_s if latest else 0.0
    if run.duration_s:
        # Full only when pgbench ran to its end; otherwise the bar stops where the run stopped.
        done = run.status == RunStatus.SUCCEEDED
        progress = 100 if done else min(100, round(100 * elapsed / run.duration_s))
    explanation = explain_failure(run.status, run.error_message, run.first_error)
    command, exact = services.shown_command(run)
    return {
        "cluster": run.cluster,
        "active_tab": "benchmarks",
        "run": run,
        "latest": latest,
        "elapsed": elapsed,
        "progress": progress,
        "stopped": run.is_terminal and run.status != RunStatus.SUCCEEDED,
        "has_samples": latest is not None,
        "queue_position": run.queue_position,
        "live_state": services.live_state(run),
        "errors": [(error, kind_label(error.kind)) for error in run.errors.order_by("id")[:20]],
        "summary_rows": _summary_rows(run.summary),
        "statement_latencies": (run.summary or {}).get("statement_latencies") or [],
        "reason": run.error_message.strip().splitlines()[-1] if run.error_message.strip() else "",
        "explanation": explanation,
        "command": command,
        "command_exact": exact,
        "command_workdir": exact and bool(run.workdir) and "$WORKDIR" in command,
    }


@require_GET
def run_detail(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> HttpResponse:
    run = _get_run(request, cluster_id, run_id)
    template = "benchmarks/run_detail.html#live" if request.htmx else "benchmarks/run_detail.html"
    response = render(request, template, _run_context(run))
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
    run = _get_run(request, cluster_id, run_id)
    samples = services.samples_after(run, _int_param(request, "after"), limit=SAMPLES_PAGE)
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
    run = _get_run(request, cluster_id, run_id)
    try:
        services.cancel_run(run)
    except ServiceError as exc:
        messages.warning(request, exc.message)
    else:
        messages.success(request, _("Run cancelled; the samples so far are kept."))
    url = reverse("benchmarks:run-detail", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
def run_export(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID, fmt: str) -> HttpResponse:
    run = _get_run(request, cluster_id, run_id)
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


# --- compare --------------------------------------------------------------------------------------


def _picked_runs(request: HttpRequest, cluster: Cluster) -> list[BenchmarkRun]:
    ids: list[uuid.UUID] = []
    for value in request.GET.getlist("run")[:MAX_COMPARED]:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    picked = _runs_for(request).filter(cluster=cluster, pk__in=ids).select_related("cluster")
    # Oldest first: the order the runs were made in, whatever order the form sent them in (the
    # history lists them newest first; a comparison reads as a story from the first run on).
    return sorted(picked, key=lambda run: (run.created_at, run.sweep_index))


@require_GET
def compare(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
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
    context["query"] = request.GET.urlencode()
    return render(request, "benchmarks/compare.html", context)


@require_GET
def compare_data(request: HttpRequest, cluster_id: uuid.UUID) -> JsonResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        comparison = services.compare_runs(_picked_runs(request, cluster))
    except ServiceError as exc:
        return JsonResponse({"error": exc.message}, status=400)
    return JsonResponse(comparison)


# --- sweeps ---------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
def sweep_launch(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    if request.method == "GET":
        return redirect("benchmarks:tab", cluster_id=cluster.pk)
    form = SweepForm(request.POST, cluster=cluster)
    if form.is_valid():
        data = form.cleaned_data
        # The database field is for direct runs; a pool implies its own.
        pools_only = all(pool is not None for pool in data["targets"])
        try:
            sweep = services.launch_sweep(
                cluster,
                clients_list=data["clients_list"],
                pools=data["targets"],
                repeats=data["repeats"],
                base_options=form.base_options(),
                database=None if pools_only else data["database"],
                name=data["name"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            url = reverse("benchmarks:sweep-detail", kwargs={"cluster_id": cluster.pk, "sweep_id": sweep.pk})
            return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
    return _render_tab(request, cluster, sweep_form=form)


def _sweep_context(sweep: Sweep) -> dict[str, Any]:
    runs = list(sweep.runs.order_by("sweep_index"))
    return {
        "cluster": sweep.cluster,
        "active_tab": "benchmarks",
        "sweep": sweep,
        "runs": runs,
        "running": any(run.status in RunStatus.ACTIVE for run in runs),
        "finished": sum(1 for run in runs if run.is_terminal),
    }


@require_GET
def sweep_detail(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> HttpResponse:
    sweep = _get_sweep(request, cluster_id, sweep_id)
    template = "benchmarks/sweep_detail.html#runs" if request.htmx else "benchmarks/sweep_detail.html"
    return render(request, template, _sweep_context(sweep))


@never_cache
@require_GET
def sweep_data(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> JsonResponse:
    sweep = _get_sweep(request, cluster_id, sweep_id)
    results = services.sweep_results(sweep)
    running = any(
        status in RunStatus.ACTIVE for points in results.values() for p in points for status in p["statuses"]
    )
    return JsonResponse({"done": not running, "targets": results})
