"""A cluster's secrets in the clear: each is kept encrypted on its row (``panel.crypto``) and
decrypted only here, by whoever needs it at that moment (a connection, Patroni's REST API)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from panel import crypto

if TYPE_CHECKING:
    from panel.clusters.models.clusters import Cluster


def superuser_password(cluster: Cluster) -> str:
    return crypto.decrypt(cluster.superuser_password_encrypted)


def monitor_password(cluster: Cluster) -> str:
    return crypto.decrypt(cluster.monitor_password_encrypted)


def rest_credentials(cluster: Cluster) -> tuple[str, str]:
    """The user and password of its members' Patroni REST API."""
    return cluster.rest_username, crypto.decrypt(cluster.rest_password_encrypted)
