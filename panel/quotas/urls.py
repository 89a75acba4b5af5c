"""Quotas tab URLs, under /clusters/<id>/quotas/."""

from __future__ import annotations

from django.urls import path

from panel.quotas import views

app_name = "quotas"
urlpatterns = [
    path("", views.quota_tab, name="tab"),
    path("set/", views.quota_set, name="set"),
    path("grace/", views.quota_grace, name="grace"),
    path("report.csv", views.quota_csv, name="csv"),
    path("<uuid:quota_id>/remove/", views.quota_remove, name="remove"),
    path("<uuid:quota_id>/allow-writes/", views.quota_allow_writes, name="allow-writes"),
]
