"""The Prometheus endpoint, and the Insights tab of a cluster (one namespace, "insights")."""

from __future__ import annotations

from django.urls import include, path

from panel.insights import views

app_name = "insights"

cluster_patterns = [
    path("", views.insights_tab, name="tab"),
    path("data/", views.insights_data, name="data"),
    path("alerts/", views.alert_rules, name="alerts"),
    path("alerts/<int:rule_id>/delete/", views.alert_rule_delete, name="alert-delete"),
]

query_patterns = [
    path("", views.queries_tab, name="queries"),
    path("reset/", views.queries_reset, name="queries-reset"),
    path("<str:queryid>/", views.query_detail, name="query-detail"),
    path("<str:queryid>/data/", views.query_data, name="query-data"),
]

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    # Under the cluster's URLs like pools and benchmarks; kept in this urlconf so that "insights:…"
    # names one namespace (two includes with one app_name would shadow each other's names).
    path("clusters/<uuid:cluster_id>/insights/", include(cluster_patterns)),
    path("clusters/<uuid:cluster_id>/queries/", include(query_patterns)),
]
