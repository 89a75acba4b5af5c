"""What a cluster is (provisioned here or attached) and the statuses it goes through, with the word
for each inside a sentence."""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils.translation import gettext_lazy as _

from panel.core.errors import N_, Term


class ClusterKind(models.TextChoices):
    LOCAL = "local", _("Provisioned here")
    EXTERNAL = "external", _("Attached server")


class ClusterStatus(models.TextChoices):
    CREATING = "creating", _("Creating")
    ONLINE = "online", _("Online")
    DEGRADED = "degraded", _("Degraded")
    STOPPED = "stopped", _("Stopped")
    STARTING = "starting", _("Starting")
    STOPPING = "stopping", _("Stopping")
    ERROR = "error", _("Error")
    DELETING = "deleting", _("Deleting")
    RESIZING = "resizing", _("Resizing")

    # States in which a background job is working on the cluster.
    BUSY: ClassVar[frozenset[str]]
    # States in which the cluster is expected to accept connections.
    SERVING: ClassVar[frozenset[str]]


# A status inside a sentence ("The cluster is stopped; …"), translated where the sentence is read.
STATUS_WORDS: dict[str, str] = {
    ClusterStatus.CREATING: N_("creating"),
    ClusterStatus.ONLINE: N_("online"),
    ClusterStatus.DEGRADED: N_("degraded"),
    ClusterStatus.STOPPED: N_("stopped"),
    ClusterStatus.STARTING: N_("starting"),
    ClusterStatus.STOPPING: N_("stopping"),
    ClusterStatus.ERROR: N_("in error"),
    ClusterStatus.DELETING: N_("being deleted"),
    ClusterStatus.RESIZING: N_("being resized"),
}


def status_word(status: str) -> Term:
    return Term(STATUS_WORDS.get(status, status))


ClusterStatus.BUSY = frozenset(
    {
        ClusterStatus.CREATING,
        ClusterStatus.STARTING,
        ClusterStatus.STOPPING,
        ClusterStatus.DELETING,
        ClusterStatus.RESIZING,
    }
)
ClusterStatus.SERVING = frozenset({ClusterStatus.ONLINE, ClusterStatus.DEGRADED})
