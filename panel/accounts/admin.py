"""Account settings in the admin, for staff."""

from __future__ import annotations

from django.contrib import admin

from panel.accounts.models import AccountSettings


@admin.register(AccountSettings)
class AccountSettingsAdmin(admin.ModelAdmin):
    list_display = ("user", "language")
    search_fields = ("user__username",)
