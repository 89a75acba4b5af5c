"""Backups tab URLs, under /clusters/<id>/backups/."""

from __future__ import annotations

from django.urls import path

from panel.backups import views

app_name = "backups"
urlpatterns = [
    path("", views.backups_tab, name="tab"),
    path("now/", views.backup_now, name="now"),
    path("restore/", views.restore_view, name="restore"),
]
