"""Admin pages for alert rules (metrics are read through the Insights tab and /metrics)."""

from __future__ import annotations

from django.contrib import admin

from panel.insights.models import AlertRule, AlertState


class AlertStateInline(admin.StackedInline):
    model = AlertState
    extra = 0
    readonly_fields = ("pending_since", "firing_since", "last_notified_at", "last_value", "evaluated_at")


@admin.register(AlertRule)
class AlertRuleAdmin(admin.ModelAdmin):
    list_display = ("cluster", "kind", "threshold", "duration_seconds", "enabled", "email")
    list_filter = ("kind", "enabled")
    inlines = [AlertStateInline]
