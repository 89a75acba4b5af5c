"""Personal access tokens: who calls the API, and what they may do with it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class Scope(models.TextChoices):
    """What a token may do, named as the managed service names its scopes."""

    READ = "database:read", _("Read clusters")
    CREATE = "database:create", _("Create clusters, users, databases and pools")
    UPDATE = "database:update", _("Change clusters, users, databases and pools")
    DELETE = "database:delete", _("Delete clusters, users, databases and pools")
    VIEW_CREDENTIALS = "database:view_credentials", _("See passwords in responses")


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A personal access token. Only the SHA-256 of the secret is kept: the plaintext is shown
    once, when it is made. ``prefix`` is public (it is part of the token too) and names the token
    in lists, on the command line and in the lookup that precedes the comparison."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.CharField(max_length=200)  # space-separated Scope values
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = [
            models.CheckConstraint(condition=~models.Q(scopes=""), name="api_token_has_scopes"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix})"

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scope_list

    def revoke(self) -> None:
        """Revoked from now on; revoking twice keeps the first time."""
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
