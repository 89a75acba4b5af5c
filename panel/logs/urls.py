"""Logs tab URLs, under /clusters/<id>/logs/."""

from __future__ import annotations

from django.urls import path

from panel.logs import views

app_name = "logs"
urlpatterns = [
    path("", views.logs_tab, name="tab"),
    path("tail/", views.logs_tail, name="tail"),
    path("download/", views.logs_download, name="download"),
    path("slow-queries/", views.slow_queries, name="slow-queries"),
]
