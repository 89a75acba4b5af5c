"""Prometheus like the managed service: one pair of basic-auth credentials per account for the
scrape endpoints of all its clusters, and each cluster's own exposition (its figures only)."""

from __future__ import annotations

import hmac
import re
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.core.errors import N_, ServiceError
from panel.insights.face import exposition
from panel.managed.models import MetricsCredentials

USERNAME = re.compile(r"[A-Za-z0-9_.@-]{3,64}")
MIN_PASSWORD = 12
MAX_PASSWORD = 128


def credentials_of(account: Any) -> MetricsCredentials:
    """The account's credentials, made on first use (a random user name and password)."""
    found = MetricsCredentials.objects.filter(account=account).first()
    if found is not None:
        return found
    row = MetricsCredentials(account=account, username=f"metrics-{secrets.token_hex(6)}")
    row.password = secrets.token_urlsafe(24)
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:  # made meanwhile by another request
        return MetricsCredentials.objects.get(account=account)
    return row


def set_credentials(account: Any, username: str | None, password: str | None) -> MetricsCredentials:
    """New credentials (a value left out keeps its current one); checked before anything is kept."""
    row = credentials_of(account)
    if username is not None and not USERNAME.fullmatch(username):
        raise ServiceError(
            N_("The user name must be 3 to 64 letters, digits, '_', '.', '@' or '-'."),
            field="basic_auth_username",
            code="metrics.username_invalid",
            params={},
        )
    if (
        password is not None
        and not MIN_PASSWORD <= len(password) <= MAX_PASSWORD
        or (password is not None and ":" in password)
    ):
        raise ServiceError(
            N_("The password must be %(low)d to %(high)d characters, without ':'."),
            field="basic_auth_password",
            code="metrics.password_invalid",
            params={"low": MIN_PASSWORD, "high": MAX_PASSWORD},
        )
    if (
        username is not None
        and MetricsCredentials.objects.filter(username=username).exclude(pk=row.pk).exists()
    ):
        raise ServiceError(
            N_("That user name is taken."),
            field="basic_auth_username",
            code="metrics.username_taken",
            params={},
        )
    if username is not None:
        row.username = username
    if password is not None:
        row.password = password
    row.updated_at = timezone.now()
    row.save()
    return row


def account_for(username: str, password: str) -> Any | None:
    """The account whose credentials these are, or None (compared in constant time)."""
    row = MetricsCredentials.objects.select_related("account").filter(username=username).first()
    if row is None:
        hmac.compare_digest(password.encode(), secrets.token_urlsafe(24).encode())  # the same work
        return None
    if not hmac.compare_digest(password.encode(), row.password.encode()):
        return None
    return row.account if row.account.is_active else None


def scrape(account: Any, cluster_id: Any) -> bytes | None:
    """The exposition of one of ``account``'s clusters (None: not one of its clusters)."""
    clusters = Cluster.objects.filter(pk=cluster_id, owner=account)
    if not clusters.exists():
        return None
    return exposition(clusters)
