"""Connection pools of a cluster, and the state of the PgBouncer that serves them."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.models import Cluster
from panel.pools.lib.pgbouncer_ini import POOL_NAME_MAX

StrOrPromise = str | Promise


class PoolMode(models.TextChoices):
    TRANSACTION = "transaction", _("Transaction")
    SESSION = "session", _("Session")
    STATEMENT = "statement", _("Statement")

    # One line for the form, what each mode means to a client.
    HELP: ClassVar[dict[str, StrOrPromise]]


PoolMode.HELP = {
    PoolMode.TRANSACTION: _(
        "A server connection is held for one transaction only: the most clients per connection."
    ),
    PoolMode.SESSION: _("A server connection is held until the client disconnects."),
    PoolMode.STATEMENT: _(
        "A server connection is held for one statement; multi-statement transactions are refused."
    ),
}


class ConnectionPool(models.Model):
    """A PgBouncer pool: clients connect to the pooler with the pool's name as database name.

    ``user`` empty means the *inbound user*: whoever connects is logged in to the server as
    themselves. The name is immutable after creation; everything else is replaced in one update.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pools")
    name = models.CharField(_("pool name"), max_length=POOL_NAME_MAX)
    database = models.CharField(_("database"), max_length=63)
    user = models.CharField(_("user"), max_length=63, blank=True, help_text=_("Empty: the inbound user."))
    mode = models.CharField(_("mode"), max_length=16, choices=PoolMode.choices, default=PoolMode.TRANSACTION)
    size = models.PositiveIntegerField(_("size"))
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.UniqueConstraint(fields=("cluster", "name"), name="pool_name_unique_per_cluster"),
            models.CheckConstraint(condition=Q(size__gte=1), name="pool_size_at_least_1"),
            models.CheckConstraint(condition=Q(mode__in=PoolMode.values), name="pool_mode_known"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_inbound_user(self) -> bool:
        return not self.user


class PoolerStatus(models.TextChoices):
    STOPPED = "stopped", _("Stopped")
    RUNNING = "running", _("Running")
    ERROR = "error", _("Error")


class Pooler(models.Model):
    """The PgBouncer of one cluster: what the panel last did with it, and its admin password.

    The admin role exists only in PgBouncer's auth file, so its password is kept here
    (encrypted) rather than as a DatabaseUser of the cluster.
    """

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="pooler")
    status = models.CharField(max_length=16, choices=PoolerStatus.choices, default=PoolerStatus.STOPPED)
    error_message = models.TextField(blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    admin_password_encrypted = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"PgBouncer of {self.cluster}"

    admin_password = crypto.Encrypted("admin_password_encrypted")

    def mark_running(self) -> None:
        self.status = PoolerStatus.RUNNING
        self.error_message = ""
        self.applied_at = timezone.now()
        self.save(update_fields=["status", "error_message", "applied_at", "updated_at"])

    def mark_stopped(self) -> None:
        self.status = PoolerStatus.STOPPED
        self.error_message = ""
        self.save(update_fields=["status", "error_message", "updated_at"])

    def fail(self, reason: str) -> None:
        self.status = PoolerStatus.ERROR
        self.error_message = reason
        self.save(update_fields=["status", "error_message", "updated_at"])
