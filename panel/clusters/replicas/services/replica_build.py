"""Making a read-only replica, as one pipeline like the provisioning's (whose steps it reuses):

    claim → prepare → build the guard → base backup from the source (pg_basebackup, a slot:
          with standbys a Patroni permanent slot)
          → certificates → configure (standby.conf, standby.signal) → start and stream → record

The replica is a cluster row of its own (``replica_of`` its source), on the node placement chose
(another than the source's when one has room; this runs on that node's worker, and what must be
done on the source is asked of the source's node: ``replica_source``), with its own ports, system
user, certificate and CA; its data, roles and passwords are the source's
(hot standby replays them). A step that fails removes everything the replica had (processes,
files, system user, its slot on the source, rows) and is an event on the source.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Manager, QuerySet
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from panel import crypto
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.lib.pgconf import QUOTA_FILE
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.clusters.replicas.services import replica_source, streaming
from panel.clusters.services import failures, lifecycle, provision, transitions
from panel.clusters.standbys.services import ha_files
from panel.core import runas
from panel.core.errors import N_, Message
from panel.core.polling import wait_for
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

Job = provision.Provisioning


def build_replica(replica_id: uuid.UUID | str) -> str:
    """Run the pipeline on a replica waiting in ``creating``; returns "" when it is online, else
    why it failed (the replica is gone then)."""
    claimed = Cluster.objects.filter(
        pk=replica_id, status=ClusterStatus.CREATING, progress=0, replica_of__isnull=False
    ).update(progress=1, progress_message=_("Starting"), updated_at=timezone.now())
    replica = Cluster.objects.select_related("replica_of", "node").filter(pk=replica_id).first()
    if not claimed or replica is None:
        return ""
    job = Job(replica)
    try:
        for percent, label, step in STEPS:
            if label:
                transitions.set_progress(replica, percent, str(label))
            step(job)
    except Exception as exc:
        return abandon(replica, exc)
    return ""


def prepare(job: Job) -> None:
    """A clean slate and the replica's own system user. The panel's roles on the replica are the
    source's (replicated), so are their passwords."""
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    job.user = provision.prepare_copy(replica, source)


def base_backup(job: Job) -> None:
    """The source's replication role and pg_hba line (on the source's node), then its data over a
    streaming connection (from here: the replica's node)."""
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    replica_source.admit(source)
    source.refresh_from_db(fields=["replication_password_encrypted"])
    password = crypto.decrypt(source.replication_password_encrypted)
    postgres.make_data_root(replica.data_root, job.user)
    streaming.write_login_files(replica, password)
    slot = streaming.slot_name(replica)
    replica_source.prepare_slot(source, slot, job.timeout)
    postgres.basebackup(
        replica.version,
        replica.pgdata,
        streaming.conninfo(replica),
        slot,
        passfile=replica.data_root / "replication" / streaming.PASSFILE,
        user=job.user,
        timeout=settings.PANEL_BACKUP_TIMEOUT,
    )
    # The source's storage-quota stops are not the replica's to enforce (it takes no writes).
    (replica.pgdata / QUOTA_FILE).unlink(missing_ok=True)
    if source.is_ha:
        _unpatroni(job)


# What Patroni leaves in a member's data directory that a replica started by pg_ctl must not keep.
PATRONI_FILES = ("patroni.dynamic.json", "postgresql.base.conf")


def _unpatroni(job: Job) -> None:
    """A copy of a Patroni member: its postgresql.conf is Patroni's (the members' port, pg_hba.conf
    outside the data directory, the shared base configuration by an absolute path). The replica
    gets the base configuration including its own ``panel.conf``, and its own pg_hba.conf and
    pg_ident.conf in its data directory, as a copy of a one-member cluster has them."""
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    text = replica_source.base_conf(source)
    if ha_files.INCLUDE_LINE not in text:
        raise EngineError(_("The source's base configuration does not include its panel.conf."))
    runas.write_private_file(replica.pgdata / "postgresql.conf", text, owner=job.user)
    for name in PATRONI_FILES:
        (replica.pgdata / name).unlink(missing_ok=True)
    isolation.write_auth_config(replica, job.user)


def start_and_stream(job: Job) -> None:
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    provision.start_server(job)
    slot = streaming.slot_name(replica)

    def streams() -> bool:
        lag = replica_source.lag(source).get(slot)
        return lag is not None and lag.state == "streaming"

    if not wait_for(streams, job.timeout, interval=0.2):
        raise EngineError(_("The replica started but does not stream from its source."))


def record(job: Job) -> None:
    """The panel's rows for the users and databases the replica has (the source's), then online."""
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    follow_source_rows(replica)
    isolation.refresh_server_auth(replica)  # PgBouncer on the replica may log in as its users
    transitions.mark_online(replica)
    transitions.log_event(
        replica,
        "online",
        Message(
            N_("Read-only replica of “%(source)s” is online on port %(port)s."),
            source=source.name,
            port=replica.port,
        ),
    )
    transitions.log_event(
        source, "replica-online", Message(N_("Read-only replica “%(name)s” is online."), name=replica.name)
    )


def follow_source_rows(replica: Cluster) -> bool:
    """The replica's user and database rows become the source's (its server has the source's
    roles and databases, replayed); True when one changed."""
    source = replica.replica_of
    assert source is not None
    with transaction.atomic():
        users = _mirror(source.users.all(), replica.users, ("password_encrypted", "is_protected"))
        databases = _mirror(source.databases.all(), replica.databases, ("owner_name", "is_protected"))
    return users or databases


def _mirror(source_rows: QuerySet[Any], replica_rows: Manager[Any], fields: tuple[str, ...]) -> bool:
    """One kind of row of the replica (users, databases) made the source's, matched by name:
    those the source lacks go, the others take its ``fields``; True when a row went or came."""
    by_name = {row.name: row for row in source_rows}
    changed = bool(replica_rows.exclude(name__in=list(by_name)).delete()[0])
    for name, row in by_name.items():
        _copy, made = replica_rows.update_or_create(name=name, defaults={f: getattr(row, f) for f in fields})
        changed |= made
    return changed


STEPS: tuple[tuple[int, str | Promise, Callable[[Job], None]], ...] = (
    (1, "", prepare),
    (5, gettext_lazy("Building the privilege guard"), provision.build_guard),
    (10, gettext_lazy("Copying the source's data (pg_basebackup)"), base_backup),
    (50, gettext_lazy("Generating TLS certificates"), provision.write_certificates),
    (60, gettext_lazy("Writing the configuration"), provision.configure),
    (70, gettext_lazy("Starting PostgreSQL and streaming from the source"), start_and_stream),
    (100, "", record),
)


def abandon(replica: Cluster, exc: Exception) -> str:
    """Nothing of a failed replica is left; a coded sentence is an event on its source, the
    engine's words are the log's (and the command line's, which the returned reason reaches)."""
    expected = isinstance(exc, EngineError | dbconn.DatabaseError | OSError)
    reason = str(exc) or type(exc).__name__
    if not expected:
        log.exception("building replica %s crashed", replica.pk)
    failed = failures.replica(replica.pk, replica.name, exc)
    source = replica.replica_of
    lifecycle.remove_failed(replica, "replica")
    replica.delete()
    if source is not None:
        transitions.log_event(source, "replica-failed", failed, EventLevel.ERROR)
    return reason
