"""The machines that hold clusters, each with the agent that runs their processes there."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def default_vip_interface() -> str:
    """The interface a new node's floating addresses go on (PANEL_VIP_INTERFACE)."""
    return settings.PANEL_VIP_INTERFACE


class NodeState(models.TextChoices):
    ACTIVE = "active", _("Active")
    DRAINING = "draining", _("Draining")


class Node(models.Model):
    """A machine that holds clusters: its agent (a Celery worker on ``node.<name>``) runs their
    processes there and says it is alive with heartbeats; the web and beat only read this row."""

    name = models.SlugField(_("name"), max_length=40, unique=True)
    # What connection details show as the host of this node's clusters.
    address = models.CharField(_("address"), max_length=255)
    # The address on the private network the node's clusters are reached by from inside it
    # (private_connection); blank: there is none, the public one serves.
    private_address = models.CharField(_("private address"), max_length=255, blank=True)
    port_first = models.PositiveIntegerField(_("first port"))
    port_last = models.PositiveIntegerField(_("last port"))
    data_dir = models.CharField(_("data directory"), max_length=500)
    ram_bytes = models.PositiveBigIntegerField(_("RAM"))
    vcpus = models.PositiveIntegerField(_("vCPUs"))
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.ACTIVE)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    # What the agent reported with its last heartbeat: the PostgreSQL majors it can run, its host.
    versions = models.CharField(max_length=100, blank=True)
    agent_host = models.CharField(max_length=255, blank=True)
    # Free space of the filesystem of its data directory, as its agent last reported it (None:
    # not reported yet); placement refuses a node nearly out of disk.
    disk_free_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    # The network interface the panel's follower puts a cluster's floating address on (standbys/services/vip.py).
    vip_interface = models.CharField(
        _("floating address interface"), max_length=15, default=default_vip_interface
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        constraints = [
            models.CheckConstraint(
                condition=Q(port_first__lt=F("port_last")), name="node_port_range_ordered"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def agent_queue(self) -> str:
        """The queue of the agent's calls the web waits for (a threads worker)."""
        return f"node.{self.name}"

    @property
    def tasks_queue(self) -> str:
        """The queue of the node's control work: provisioning, start/stop, delete, collection,
        quota cycles and reconciling (the node's worker)."""
        return f"node.{self.name}.tasks"

    @property
    def work_queue(self) -> str:
        """The queue of the tenants' long work: data sets and benchmarks (a worker of its own, so
        that no tenant's work holds up the node's control work)."""
        return f"node.{self.name}.work"

    @property
    def backups_queue(self) -> str:
        """The queue of backups and restores (a worker of its own: no tenant's data sets or
        benchmarks hold up another tenant's backup)."""
        return f"node.{self.name}.backups"

    @property
    def is_here(self) -> bool:
        """This process does the node's work in place: it is that node's agent, or a process that
        does everything itself (role "all": the tests, ``manage.py`` on a one-machine panel)."""
        return self.name == settings.PANEL_NODE_NAME and settings.PANEL_PROCESS_ROLE != "web"

    @property
    def is_alive(self) -> bool:
        """Its agent sent a heartbeat within PANEL_NODE_DEAD_AFTER seconds (or this is it)."""
        if self.is_here:
            return True
        age = self.heartbeat_age
        return age is not None and age <= settings.PANEL_NODE_DEAD_AFTER

    @property
    def heartbeat_age(self) -> int | None:
        """Seconds since its agent's last heartbeat (None: never)."""
        if self.last_heartbeat is None:
            return None
        return max(0, int((timezone.now() - self.last_heartbeat).total_seconds()))

    def version_list(self) -> list[str]:
        return [v for v in self.versions.split(",") if v]

    @classmethod
    def for_attached(cls) -> str:
        """The node that reaches attached servers (over the network: any node can): the first
        living, active one by name; this process's own when none answers."""
        for node in cls.objects.filter(state=NodeState.ACTIVE).order_by("name"):
            if node.is_alive:
                return node.name
        return settings.PANEL_NODE_NAME


class CycleKind(models.TextChoices):
    RECONCILE = "reconcile", _("Reconciler round")
    COLLECT = "collect", _("Metrics collection")


class NodeCycle(models.Model):
    """The last round of one periodic job on a node (a reconciler round, a metrics collection):
    when it began and how long it took, written by the node's agent as the round ends, so the
    Nodes page shows whether the node keeps up with the job's period."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="cycles")
    kind = models.CharField(max_length=16, choices=CycleKind.choices)
    started_at = models.DateTimeField()
    seconds = models.FloatField()

    class Meta:
        ordering = ("node", "kind")
        constraints = [
            models.UniqueConstraint(fields=("node", "kind"), name="node_cycle_one_per_kind"),
            models.CheckConstraint(condition=Q(seconds__gte=0), name="node_cycle_seconds_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.node_id} {self.kind} {self.seconds:.2f} s"

    @property
    def period(self) -> int:
        """How often beat sends this job (seconds): a round longer than that falls behind."""
        if self.kind == CycleKind.RECONCILE:
            return int(settings.PANEL_RECONCILE_SECONDS)
        return int(settings.PANEL_METRICS_INTERVAL)

    @property
    def is_slow(self) -> bool:
        return self.seconds > self.period
