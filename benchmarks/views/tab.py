"""The Benchmarks tab: data sets and their initialisation, the run and sweep forms, the history."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from benchmarks import services
from benchmarks.forms import InitDataSetForm, RunForm, SweepForm
from benchmarks.services import pages
from panel.clusters.face import get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, add_service_error, go_to
from panel.pools.face import services as pools_services


def _datasets_context(cluster: Cluster, form: InitDataSetForm | None = None) -> dict[str, Any]:
    return {**pages.datasets_card(cluster), "init_form": form or InitDataSetForm(cluster=cluster)}


def baseline_clients(cluster: Cluster) -> int:
    """The client count the empty history suggests for a first run: half the connections the plan
    leaves to clients, at most 50 (it said 50 on a plan of 22 connections, which refuses them)."""
    usable = cluster.pool_connections
    return 50 if usable is None else max(1, min(50, usable // 2))


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
        "pool_budget": pools_services.pool_budget(cluster),
        "baseline_clients": baseline_clients(cluster),
        **_datasets_context(cluster, init_form),
        **pages.history_card(cluster),
    }
    return render(request, "benchmarks/tab.html", context)


@require_GET
def tab(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return _render_tab(request, cluster)


def _card(
    request: HttpRequest, cluster_id: uuid.UUID, fragment: str, card: Callable[[Cluster], dict[str, Any]]
) -> HttpResponse:
    """One card of the tab, as its polling asks for it."""
    cluster = get_cluster_for_user(request, cluster_id)
    return render(request, f"benchmarks/tab.html#{fragment}", card(cluster))


@never_cache
@require_GET
def datasets(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The data sets card, polled every second while one is being initialised."""
    # Polled every second: no init form (and its database query) for a fragment that does not show it.
    return _card(request, cluster_id, "datasets-live", pages.datasets_card)


@never_cache
@require_GET
def history(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The runs table, polled every 2 s while a run is queued or running."""
    return _card(request, cluster_id, "history", pages.history_card)


@require_POST
def dataset_init(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form: InitDataSetForm | None  # None: the card without a form's errors
    form = InitDataSetForm(request.POST, cluster=cluster)
    if form.is_valid():
        try:
            services.init_dataset(cluster, **form.service_kwargs())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            if not request.htmx:
                return redirect("benchmarks:tab", cluster_id=cluster.pk)
            form = None
    if request.htmx:
        return render(request, "benchmarks/tab.html#datasets", _datasets_context(cluster, form))
    return _render_tab(request, cluster, init_form=form)


@require_POST
def run_check(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The warnings of the run form as filled so far: shown before launch, never blocking."""
    cluster = get_cluster_for_user(request, cluster_id)
    form = RunForm(request.POST, cluster=cluster)
    warnings = services.preview_warnings(cluster, **form.service_kwargs()) if form.is_valid() else []
    return render(request, "benchmarks/tab.html#warnings", {"warnings": warnings, "checked": True})


@require_POST
def run_launch(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
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
            return go_to(request, url)
    if request.htmx:
        context = {"cluster": cluster, "run_form": form}
        return render(request, "benchmarks/tab.html#run-form", context)
    return _render_tab(request, cluster, run_form=form)


@require_POST
def sweep_launch(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = SweepForm(request.POST, cluster=cluster)
    if form.is_valid():
        try:
            sweep = services.launch_sweep(cluster, **form.service_kwargs())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            url = reverse("benchmarks:sweep-detail", kwargs={"cluster_id": cluster.pk, "sweep_id": sweep.pk})
            return go_to(request, url)
    return _render_tab(request, cluster, sweep_form=form)
