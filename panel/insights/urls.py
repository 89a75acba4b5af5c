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

urlpatterns = [
    path("metrics", views.metrics, name="metrics"),
    # Under the cluster's URLs like pools and benchmarks; kept in this urlconf so that "insights:…"
    # names one namespace (two includes with one app_name would shadow each other's names).
    path("clusters/<uuid:cluster_id>/insights/", include(cluster_patterns)),
]
