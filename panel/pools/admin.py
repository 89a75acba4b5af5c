"""Django admin for pools (the PgBouncer admin password is never shown)."""

from __future__ import annotations

from django.contrib import admin

from panel.pools.models import ConnectionPool, Pooler


@admin.register(ConnectionPool)
class ConnectionPoolAdmin(admin.ModelAdmin):
    list_display = ("name", "cluster", "database", "user", "mode", "size", "created_at")
    list_filter = ("mode",)
    search_fields = ("name", "cluster__name")
    readonly_fields = ("name",)


@admin.register(Pooler)
class PoolerAdmin(admin.ModelAdmin):
    list_display = ("cluster", "status", "applied_at", "updated_at")
    exclude = ("admin_password_encrypted",)
    readonly_fields = ("status", "error_message", "applied_at")
