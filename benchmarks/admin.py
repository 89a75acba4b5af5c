"""Django admin for benchmark records (read-mostly: the services own the state machines)."""

from __future__ import annotations

from django.contrib import admin

from benchmarks.models import BenchmarkRun, DataSet, RunError, Sweep


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    list_display = ("id", "cluster", "pool_name", "database", "clients", "status", "created_at")
    list_filter = ("status", "script")
    search_fields = ("id", "cluster__name", "pool_name", "database")
    readonly_fields = ("status", "command_display", "exit_code", "summary", "heartbeat_at", "pgbench_pid")


@admin.register(DataSet)
class DataSetAdmin(admin.ModelAdmin):
    list_display = ("database", "cluster", "scale", "status", "progress", "size_bytes", "created_at")
    list_filter = ("status",)


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    list_display = ("id", "cluster", "name", "repeats", "created_at")


@admin.register(RunError)
class RunErrorAdmin(admin.ModelAdmin):
    list_display = ("run", "at", "kind", "message", "client_id")
    list_filter = ("kind",)
