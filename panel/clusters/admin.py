"""Django admin for clusters (passwords never shown here: they stay encrypted)."""

from __future__ import annotations

from django.contrib import admin

from panel.clusters.models import Cluster, ClusterEvent, Database, DatabaseUser
from panel.core.paging import PER_PAGE


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "kind", "status", "version", "plan_slug", "port", "created_at")
    list_filter = ("kind", "status", "version")
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)
    list_per_page = PER_PAGE
    exclude = ("superuser_password_encrypted", "monitor_password_encrypted")
    # The OS user is the panel's to set: pointing a cluster at another's user would share its files.
    readonly_fields = (
        "status",
        "progress",
        "progress_message",
        "error_message",
        "port",
        "pooler_port",
        "os_user_name",
    )


@admin.register(DatabaseUser)
class DatabaseUserAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "is_protected", "created_at")
    exclude = ("password_encrypted",)


@admin.register(Database)
class DatabaseAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "owner_name", "is_protected")


@admin.register(ClusterEvent)
class ClusterEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "cluster", "level", "kind", "message")
    list_select_related = ("cluster",)
    list_per_page = PER_PAGE
    list_filter = ("level", "kind")
