"""Connection pool URLs, mounted under a cluster: /clusters/<cluster_id>/pools/…"""

from __future__ import annotations

from django.urls import path

from panel.pools import views

app_name = "pools"
urlpatterns = [
    path("", views.pool_list, name="list"),
    path("stats/", views.pool_stats, name="stats"),
    path("new/", views.pool_create, name="create"),
    path("slots/", views.pool_slots, name="slots"),
    path("release/", views.pools_release, name="release-all"),
    path("<uuid:pool_id>/release/", views.pool_release, name="release"),
    path("<uuid:pool_id>/", views.pool_detail, name="detail"),
    path("<uuid:pool_id>/edit/", views.pool_edit, name="edit"),
    path("<uuid:pool_id>/delete/", views.pool_delete, name="delete"),
    path("<uuid:pool_id>/connection/", views.connection, name="connection"),
    path("<uuid:pool_id>/connection/reveal/", views.connection_reveal, name="connection-reveal"),
    path("<uuid:pool_id>/connection/secret/", views.connection_secret, name="connection-secret"),
]
