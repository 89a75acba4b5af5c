"""A cluster: what it is (provisioned here or attached), its status, where its files are on its
node, and the values derived from its row (templates read them as attributes).

What is done with a cluster lives with its concern: status transitions and events in
``services.transitions``, its secrets in the clear in ``models.credentials``, the server the panel
reaches in ``models.servers``, its trusted sources in ``models.firewall``, its system user in
``engine.isolation``."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel import crypto
from panel.clusters.lib.plans import Plan, get_plan
from panel.clusters.models.members import watched_elsewhere
from panel.clusters.models.nodes import Node
from panel.clusters.models.status import ClusterKind, ClusterStatus
from panel.clusters.standbys.lib.patroni import new_rest_username

# A primary and up to two standbys (the managed service's standby nodes), on plans of 2 GB or more.
MAX_NUM_NODES = 3
MIN_HA_RAM_GB = 2


class ClusterQuerySet(models.QuerySet["Cluster"]):
    def here(self) -> ClusterQuerySet:
        """The local clusters whose processes this machine runs: those of this process's node
        (PANEL_NODE_NAME). The node's periodic work (reconciling, collection, the benchmark
        reaper) goes over these only; another node's agent does the same for its own."""
        return self.filter(kind=ClusterKind.LOCAL).filter(
            Q(node__name=settings.PANEL_NODE_NAME) | Q(node__isnull=True)
        )


class Cluster(models.Model):
    """A PostgreSQL server: provisioned on this machine, or an existing one attached by address."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="clusters")
    name = models.CharField(_("name"), max_length=63)
    kind = models.CharField(max_length=16, choices=ClusterKind.choices, default=ClusterKind.LOCAL)
    version = models.CharField(_("PostgreSQL version"), max_length=16)
    plan_slug = models.CharField(_("plan"), max_length=32, blank=True)
    status = models.CharField(max_length=16, choices=ClusterStatus.choices, default=ClusterStatus.CREATING)
    progress = models.PositiveSmallIntegerField(default=0)
    progress_message = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    # The node whose agent runs this cluster (none for an attached server).
    node = models.ForeignKey(Node, on_delete=models.PROTECT, null=True, blank=True, related_name="clusters")
    host = models.CharField(max_length=255, default="127.0.0.1")
    # An attached server: the address attach checked (libpq's hostaddr), which every later
    # connection goes to whatever the name resolves to by then; blank when none was checked.
    host_address = models.CharField(max_length=45, blank=True)
    port = models.PositiveIntegerField(null=True, blank=True)
    pooler_port = models.PositiveIntegerField(null=True, blank=True)
    # With standbys: HAProxy's second port, which serves reads from a standby (the managed
    # service's standby_connection); none for one member.
    standby_port = models.PositiveIntegerField(null=True, blank=True)
    sslmode = models.CharField(max_length=16, default="require")
    admin_user = models.CharField(max_length=63, default="doadmin")
    default_database = models.CharField(max_length=63, default="defaultdb")
    superuser_password_encrypted = models.TextField(blank=True)
    # The system user that runs this cluster's PostgreSQL and PgBouncer and owns its data root,
    # when the panel runs as root. Blank: created before clusters had a user of their own (they
    # run as PANEL_RUN_AS_USER until the reconciler moves them), or the panel does not run as root.
    os_user_name = models.CharField(max_length=32, blank=True)
    # The monitor role's (settings.PANEL_MONITOR_ROLE); empty until it is created on the server.
    monitor_password_encrypted = models.TextField(blank=True)
    ca_certificate = models.TextField(blank=True)
    # The PostgreSQL settings its owner changed (panel/clusters/lib/tunables.py: name → value);
    # the others keep PostgreSQL's defaults. Rendered into PGDATA/settings.conf.
    config = models.JSONField(default=dict, blank=True)
    # Members: 1 is one postmaster the reconciler supervises; 2-3 are a primary and standbys run by
    # Patroni (ClusterMember rows), with etcd, HAProxy on ``port`` and PgBouncer following the primary.
    num_nodes = models.PositiveSmallIntegerField(_("nodes"), default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    online_since = models.DateTimeField(null=True, blank=True)
    # A read-only replica streams from this cluster (panel/clusters/replicas/services/replicas.py); a
    # source with replicas cannot be deleted. Cleared when the replica is promoted.
    replica_of = models.ForeignKey(
        "self", on_delete=models.RESTRICT, null=True, blank=True, related_name="replicas"
    )
    # The password of the source's replication role (settings.PANEL_REPLICATION_ROLE), once made.
    replication_password_encrypted = models.TextField(blank=True)
    # Patroni's REST API on every member asks for these on each unsafe request (switchover, PATCH
    # /config, restart, reinitialize): a member on another node listens on its node's address.
    rest_username = models.CharField(max_length=32, default=new_rest_username)
    rest_password_encrypted = models.TextField(default=crypto.new_encrypted_secret)
    # An operator's: the address the panel's follower keeps on the primary's node (standbys/services/vip.py); blank: none.
    floating_address = models.CharField(_("floating address"), max_length=18, blank=True)

    objects = ClusterQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at",)
        constraints = [
            models.UniqueConstraint(fields=("owner", "name"), name="cluster_name_unique_per_owner"),
            models.UniqueConstraint(
                fields=("node", "port"), condition=Q(kind="local"), name="cluster_local_port_unique_per_node"
            ),
            models.CheckConstraint(condition=Q(progress__lte=100), name="cluster_progress_at_most_100"),
            models.CheckConstraint(
                condition=Q(num_nodes__gte=1, num_nodes__lte=MAX_NUM_NODES), name="cluster_num_nodes_1_to_3"
            ),
        ]
        indexes = [models.Index(fields=("kind", "status"), name="cluster_kind_status_idx")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_local(self) -> bool:
        return self.kind == ClusterKind.LOCAL

    @property
    def is_ha(self) -> bool:
        """Run by Patroni with standbys (a local cluster of 2-3 members)."""
        return self.is_local and self.num_nodes > 1

    @property
    def agent_queue(self) -> str:
        """Where the web sends calls on this cluster's processes: its node's agent (an attached
        server, reached over the network, by ``Node.for_attached``)."""
        return self.node.agent_queue if self.node else f"node.{Node.for_attached()}"

    @property
    def tasks_queue(self) -> str:
        """Where this cluster's control work (provision, start/stop, delete) is sent."""
        return self.node.tasks_queue if self.node else f"node.{Node.for_attached()}.tasks"

    @property
    def work_queue(self) -> str:
        """Where its tenant's long work (data sets, benchmarks) is sent."""
        return self.node.work_queue if self.node else f"node.{Node.for_attached()}.work"

    @property
    def backups_queue(self) -> str:
        """Where its backups and restores are sent."""
        return self.node.backups_queue if self.node else f"node.{Node.for_attached()}.backups"

    @property
    def public_host(self) -> str:
        """The host clients connect to: the node's address (an attached server: its own)."""
        if not self.is_local:
            return self.host
        return self.node.address if self.node else settings.PANEL_PUBLIC_HOST

    @property
    def private_host(self) -> str:
        """The host of the private connection details: the node's private address when it has
        one, else the public host (one network)."""
        if self.is_local and self.node and self.node.private_address:
            return self.node.private_address
        return self.public_host

    @property
    def node_silent(self) -> bool:
        """Its node's agent stopped answering: nothing can be done there until it does."""
        return self.node is not None and not self.node.is_alive

    @property
    def status_unknown(self) -> bool:
        """Its node is silent, and (with standbys) no member's node keeps its status true for it
        (``members.watched_elsewhere``): what the row says may no longer be true."""
        return self.node_silent and not (self.is_ha and watched_elsewhere(self.pk))

    def agent_silent(self) -> bool:
        """``node_silent`` as the database says now (an object kept for a while holds its node's
        heartbeat as it was then). A method of the row: ``panel.core.agent.send``, which imports
        no app, asks it of whatever it sends a call about, as it reads ``agent_queue``."""
        if self.node is None:
            return False
        self.node.refresh_from_db(fields=["last_heartbeat"])
        return self.node_silent

    @property
    def plan(self) -> Plan | None:
        return get_plan(self.plan_slug) if self.plan_slug else None

    @property
    def max_connections(self) -> int | None:
        return self.plan.max_connections if self.plan else None

    @property
    def pool_connections(self) -> int | None:
        return self.plan.pool_connections if self.plan else None

    @property
    def data_root(self) -> Path:
        """Everything this cluster owns on disk: PGDATA, certificates, sockets, logs."""
        return Path(settings.PANEL_DATA_DIR) / "clusters" / self.id.hex

    @property
    def pgdata(self) -> Path:
        return self.data_root / "pgdata"

    @property
    def hba_path(self) -> Path:
        """pg_hba.conf; with standbys outside every data directory (pg_rewind copies a data
        directory's files from another member), shared by all members."""
        return (self.data_root / "auth" if self.is_ha else self.pgdata) / "pg_hba.conf"

    @property
    def ident_path(self) -> Path:
        return self.hba_path.with_name("pg_ident.conf")

    @property
    def socket_dir(self) -> Path:
        return self.data_root / "run"

    @property
    def log_file(self) -> Path:
        return self.data_root / "log" / "postgresql.log"

    @property
    def own_os_user_name(self) -> str:
        """The name of the system user this cluster gets: PANEL_CLUSTER_USER_PREFIX + a short id."""
        return f"{settings.PANEL_CLUSTER_USER_PREFIX}{self.id.hex[:8]}"

    @property
    def is_replica(self) -> bool:
        return self.replica_of_id is not None

    @property
    def is_busy(self) -> bool:
        return self.status in ClusterStatus.BUSY

    @property
    def is_serving(self) -> bool:
        return self.status in ClusterStatus.SERVING
