"""The panel's etcd cluster (Patroni's consensus store, one for all nodes): its CA and which
nodes hold its members."""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.models.nodes import Node


class EtcdAuthority(models.Model):
    """The panel-wide etcd CA (one row, ``name`` "panel"): it signs every member's server/peer
    certificate and every client certificate (Patroni's, the panel's); its key is encrypted at
    rest (``panel.crypto``) and read by the node agents, which issue their node's certificates."""

    name = models.CharField(max_length=40, unique=True, default="panel")
    cert_pem = models.TextField()
    key_encrypted = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.name

    key_pem = crypto.Encrypted("key_encrypted")


class EtcdMemberState(models.TextChoices):
    JOINING = "joining", _("Joining")
    RUNNING = "running", _("Running")
    LEAVING = "leaving", _("Leaving")


class EtcdMember(models.Model):
    """A member of the panel's etcd on a node. ``joining``: chosen, its node's agent adds it (a
    learner, ``member_id`` set then), starts it and promotes it; ``running``: a voting member;
    ``leaving``: its node is drained or removed, ``member remove`` comes next (any agent), then
    the row goes and its node's agent stops it. Name, address and ports are kept on the row: a
    removed node's member must still be found to be removed."""

    node = models.OneToOneField(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="etcd_member"
    )
    name = models.CharField(max_length=40, unique=True)
    host = models.CharField(max_length=255)
    client_port = models.PositiveIntegerField()
    peer_port = models.PositiveIntegerField()
    # etcd's id of the member (hex), known once ``member add`` (or the seed's member list) said it.
    member_id = models.CharField(max_length=16, blank=True)
    state = models.CharField(max_length=16, choices=EtcdMemberState.choices, default=EtcdMemberState.JOINING)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("created_at", "name")

    def __str__(self) -> str:
        return f"etcd {self.name} ({self.state})"
