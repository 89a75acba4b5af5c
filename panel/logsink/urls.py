"""Log-sink card URLs, under /clusters/<id>/logsinks/."""

from __future__ import annotations

from django.urls import path

from panel.logsink import views

app_name = "logsink"
urlpatterns = [
    path("", views.sink_card, name="card"),
    path("add/", views.sink_add, name="add"),
    path("<uuid:sink_id>/delete/", views.sink_delete, name="delete"),
]
