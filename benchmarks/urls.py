"""Benchmark URLs, mounted under a cluster: /clusters/<cluster_id>/benchmarks/…"""

from __future__ import annotations

from django.urls import path

from benchmarks import views

app_name = "benchmarks"
urlpatterns = [
    path("", views.tab, name="tab"),
    path("datasets/", views.datasets, name="datasets"),
    path("datasets/new/", views.dataset_init, name="dataset-init"),
    path("history/", views.history, name="history"),
    path("runs/check/", views.run_check, name="run-check"),
    path("runs/new/", views.run_launch, name="run-launch"),
    path("runs/<uuid:run_id>/", views.run_detail, name="run-detail"),
    path("runs/<uuid:run_id>/samples/", views.run_samples, name="run-samples"),
    path("runs/<uuid:run_id>/cancel/", views.run_cancel, name="run-cancel"),
    path("runs/<uuid:run_id>/export.<str:fmt>", views.run_export, name="run-export"),
    path("compare/", views.compare, name="compare"),
    path("compare/data/", views.compare_data, name="compare-data"),
    path("sweeps/new/", views.sweep_launch, name="sweep-launch"),
    path("sweeps/<uuid:sweep_id>/", views.sweep_detail, name="sweep-detail"),
    path("sweeps/<uuid:sweep_id>/data/", views.sweep_data, name="sweep-data"),
    path("sweeps/<uuid:sweep_id>/cancel/", views.sweep_cancel, name="sweep-cancel"),
]
