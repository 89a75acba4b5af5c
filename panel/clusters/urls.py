"""Cluster URLs: pages, the HTMX partials they swap, and the POST actions."""

from __future__ import annotations

from django.urls import path

from panel.clusters import firewall_views, member_views, node_views, replica_views, settings_views, views

app_name = "clusters"
urlpatterns = [
    path("", views.cluster_list, name="list"),
    path("new/", views.cluster_create, name="create"),
    path("attach/", views.cluster_attach, name="attach"),
    path("nodes/", node_views.node_list, name="nodes"),
    path("nodes/<slug:name>/<str:state>/", node_views.node_state, name="node-state"),
    path("<uuid:cluster_id>/", views.cluster_detail, name="detail"),
    path("<uuid:cluster_id>/live/", views.cluster_live, name="live"),
    path("<uuid:cluster_id>/replicas/", replica_views.replicas_card, name="replicas"),
    path("<uuid:cluster_id>/replicas/add/", replica_views.replica_add, name="replica-add"),
    path("<uuid:cluster_id>/promote/", replica_views.replica_promote, name="replica-promote"),
    path("<uuid:cluster_id>/members/", member_views.members_card, name="members"),
    path("<uuid:cluster_id>/members/switchover/", member_views.switchover, name="switchover"),
    path("<uuid:cluster_id>/users/", views.cluster_users, name="users"),
    path("<uuid:cluster_id>/settings/", settings_views.cluster_settings, name="settings"),
    path(
        "<uuid:cluster_id>/settings/trusted-sources/add/",
        firewall_views.trusted_source_add,
        name="trusted-source-add",
    ),
    path(
        "<uuid:cluster_id>/settings/trusted-sources/remove/",
        firewall_views.trusted_source_remove,
        name="trusted-source-remove",
    ),
    path("<uuid:cluster_id>/settings/resize/", settings_views.resize_card, name="resize"),
    path("<uuid:cluster_id>/settings/config/", settings_views.config_card, name="config"),
    path("<uuid:cluster_id>/connection/", views.connection, name="connection"),
    path("<uuid:cluster_id>/connection/reveal/", views.connection_reveal, name="connection-reveal"),
    path("<uuid:cluster_id>/connection/secret/", views.connection_secret, name="connection-secret"),
    path("<uuid:cluster_id>/ca-certificate/", views.ca_certificate, name="ca-certificate"),
    path("<uuid:cluster_id>/actions/<str:action>/", views.cluster_action, name="action"),
    path("<uuid:cluster_id>/retry/", views.cluster_retry, name="retry"),
    path("<uuid:cluster_id>/delete/", views.cluster_delete, name="delete"),
    path("<uuid:cluster_id>/users/add/", views.user_add, name="user-add"),
    path("<uuid:cluster_id>/users/<str:name>/delete/", views.user_delete, name="user-delete"),
    path(
        "<uuid:cluster_id>/users/<str:name>/reset-password/",
        views.user_reset_password,
        name="user-reset-password",
    ),
    path("<uuid:cluster_id>/databases/add/", views.database_add, name="database-add"),
    path("<uuid:cluster_id>/databases/<str:name>/delete/", views.database_delete, name="database-delete"),
]
