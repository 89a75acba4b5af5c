"""A cluster's login roles and databases, as the panel records them."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.core.errors import N_, ServiceError


class DatabaseUser(models.Model):
    """A login role on a cluster, with its password kept encrypted so it can be shown."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="users")
    name = models.CharField(_("user name"), max_length=63)
    password_encrypted = models.TextField()
    is_protected = models.BooleanField(default=False, help_text=_("The admin user cannot be deleted."))
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-is_protected", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "name"), name="dbuser_name_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name

    password = crypto.Encrypted("password_encrypted")

    @staticmethod
    def not_found(name: str, *, field: str | None = None, code: str = "user.not_found") -> ServiceError:
        """The refusal of a user of that name the cluster does not have."""
        return ServiceError(
            N_("No user named “%(name)s” on this cluster."), field=field, code=code, params={"name": name}
        )


class Database(models.Model):
    """A database on a cluster."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey("clusters.Cluster", on_delete=models.CASCADE, related_name="databases")
    name = models.CharField(_("database name"), max_length=63)
    owner_name = models.CharField(max_length=63, default="doadmin")
    is_protected = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-is_protected", "name")
        constraints = [
            models.UniqueConstraint(fields=("cluster", "name"), name="database_name_unique_per_cluster")
        ]

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def not_found(name: str, *, field: str | None = None, code: str = "database.not_found") -> ServiceError:
        """The refusal of a database of that name the cluster does not have."""
        return ServiceError(
            N_("No database named “%(name)s” on this cluster."), field=field, code=code, params={"name": name}
        )
