"""An account's preferences, one row per user, made when first set."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


class AccountSettings(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="panel_settings"
    )
    # Empty: follow the browser (Accept-Language), as before the account chose.
    language = models.CharField(_("language"), max_length=10, choices=settings.LANGUAGES, blank=True)

    class Meta:
        verbose_name = _("account settings")
        verbose_name_plural = _("account settings")

    def __str__(self) -> str:
        return str(self.user)
