"""Migration page URLs, under /clusters/<id>/migration/."""

from __future__ import annotations

from django.urls import path

from panel.migrate import views

app_name = "migrate"
urlpatterns = [
    path("", views.migration_tab, name="tab"),
    path("status/", views.migration_status, name="status"),
    path("<uuid:migration_id>/stop/", views.migration_stop, name="stop"),
]
