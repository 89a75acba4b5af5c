"""The scrape endpoint and the Settings tab's maintenance, tags and autoscale cards (namespace "managed")."""

from __future__ import annotations

from django.urls import path

from panel.managed import views

app_name = "managed"

urlpatterns = [
    path("metrics/clusters/<uuid:cluster_id>", views.scrape, name="scrape"),
    path("clusters/<uuid:cluster_id>/maintenance/", views.maintenance_card, name="maintenance"),
    path("clusters/<uuid:cluster_id>/tags/", views.tags_card, name="tags"),
    path("clusters/<uuid:cluster_id>/autoscale/", views.autoscale_card, name="autoscale"),
]
