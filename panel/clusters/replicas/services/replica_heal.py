"""A read-only replica that cannot follow its source any more, healed without its owner.

After a *crash* of a source's primary (not a switchover) an asynchronous replica may already hold
WAL that the standby promoted in its place never got: the new primary's timeline forked before
the replica's position, and PostgreSQL will not follow it. The reconciler notices it each pass
(``heal_diverged``) and heals it in place:

    noticed → ``creating`` (the API's ``forking``) → stop → pg_rewind against the source's primary
            → (if that fails) a new base backup in the same data directory
            → the replica's own files back (certificate, configuration) → start and stream → online

Name, ports, certificate, system user, passwords, PgBouncer and its pools stay as they were:
the connection details do not change. An event (and the owner's email) says how long it took.

Noticing is decided on the panel's own connections, never on the server's log alone (a tenant can
put any text there): the replica's walreceiver does not stream for a few seconds while its source
answers, and the timeline the replica is on is behind the source primary's. The log's words
("forked off", "not in this server's history", …) are only the reason told to the user.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.lib.pgconf import QUOTA_FILE, STANDBY_FILE
from panel.clusters.models import Cluster, ClusterStatus, EventLevel
from panel.clusters.replicas.services import replica_build, replica_source
from panel.clusters.services import failures, provision, transitions
from panel.clusters.services.provision import SETTINGS_FILE
from panel.clusters.standbys.services import ha_files
from panel.core.errors import N_, Message, message_to_text
from panel.core.polling import wait_for
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

# How long a replica may be without a streaming walreceiver before it counts as unable to follow
# (it reconnects every 500 ms: wal_retrieve_retry_interval in its standby.conf).
NOT_STREAMING_FOR = 4.0

# What PostgreSQL logs when a standby cannot follow its source's new timeline (its own words, by
# the startup process and by the walreceiver quoting the source's refusal).
DIVERGED_WORDS = re.compile(
    r"forked off current database system timeline"
    r"|is not a child of this server's history"
    r"|is not in this server's history"
    r"|is ahead of the WAL flush position"
)
LOG_TAIL_BYTES = 256 * 1024

# The replica's own files in its data directory: what a rewind or a base backup would replace
# with the source's (its certificate is what its clients verify).
OWN_FILES = (
    "server.crt",
    "server.key",
    "ca.crt",
    "postgresql.conf",
    "postgresql.auto.conf",
    "pg_hba.conf",
    "pg_ident.conf",
    "panel.conf",
    STANDBY_FILE,
    SETTINGS_FILE,
)
KEEP_DIR = "heal-keep"

# A heal that failed (its source not answering yet, a copy cut off) is tried again by the
# reconciler after RETRY_FIRST seconds, then twice as long each time up to RETRY_MAX.
RETRY_FIRST = 5.0
RETRY_MAX = 300.0
DIVERGED_EVENT = "replica-diverged"
FAILED_EVENT = "replica-heal-failed"
HEAL_EVENTS = (DIVERGED_EVENT, FAILED_EVENT, "replica-resynced")


def heal_diverged() -> list[str]:
    """The reconciler's part: every online replica here that cannot follow its source is healed,
    and every replica whose heal failed is tried again once its back-off is over; returns what
    was done, for the reconciler's notes. A healthy replica costs one query."""
    notes = []
    for replica in (
        Cluster.objects.here()
        .select_related("replica_of", "node")
        .filter(status__in=(ClusterStatus.ONLINE, ClusterStatus.ERROR), replica_of__isnull=False)
    ):
        source = replica.replica_of
        if source is None or source.status not in ClusterStatus.SERVING:
            continue  # a source that is stopped or failing over: a later pass, at no attempt's cost
        try:
            if replica.status == ClusterStatus.ERROR:
                pending = heal_pending(replica)
                if pending is not None and pending.due <= timezone.now():
                    notes.append(heal(replica, pending.reason, attempt=pending.failed + 1))
                continue
            reason = diverged(replica)
            if reason is not None:
                notes.append(heal(replica, reason))
        except Exception as exc:  # one replica's trouble must not stop the reconciler's pass
            log.exception("checking replica %s for divergence failed", replica.pk)
            notes.append(f"{replica.name}: divergence check failed: {exc}")
    return notes


@dataclass(frozen=True)
class PendingHeal:
    """A heal that failed and is to be tried again: how many attempts failed since the replica
    was found diverged, why it diverged, and when the next attempt is due."""

    failed: int
    reason: str
    due: dt.datetime


def retry_after(failed: int) -> float:
    """Seconds between a failed attempt and the next: doubling from ``RETRY_FIRST`` up to
    ``RETRY_MAX`` (a source back within seconds is caught at once, one away for long costs little)."""
    return min(RETRY_FIRST * 2 ** max(0, failed - 1), RETRY_MAX)


def heal_pending(replica: Cluster) -> PendingHeal | None:
    """The heal to try again, read from the replica's events (each failed attempt is one, after
    the ``replica-diverged`` that began it); None when its last heal did not fail."""
    events = replica.events.filter(kind__in=HEAL_EVENTS).order_by("-created_at", "-pk")
    failed = []
    began = None
    for event in events[:100]:
        if event.kind != FAILED_EVENT:
            began = event if event.kind == DIVERGED_EVENT else None
            break
        failed.append(event)
    if not failed or began is None:
        return None
    due = failed[0].created_at + dt.timedelta(seconds=retry_after(len(failed)))
    return PendingHeal(failed=len(failed), reason=began.message, due=due)


def _receiver(replica: Cluster) -> tuple[str, int | None, int]:
    """The replica's walreceiver status ("" without one), the timeline it receives, and the
    timeline of its last restartpoint (where it is when it receives nothing)."""
    with dbconn.admin_connection(replica) as conn:
        row = conn.execute("SELECT status, received_tli FROM pg_catalog.pg_stat_wal_receiver").fetchone()
        checkpoint = conn.execute("SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()").fetchone()
    status, received = (row[0] or "", row[1]) if row else ("", None)
    return status, received, int(checkpoint[0]) if checkpoint else 0


def diverged(replica: Cluster) -> str | None:
    """Why ``replica`` cannot follow its source (the server log's words when it has them), or
    None when it streams, is merely catching up, or its source does not answer."""
    source = replica.replica_of
    assert source is not None
    try:
        status, received, _checkpoint = _receiver(replica)
    except (dbconn.DatabaseError, psycopg.Error):
        return None  # not answering: restarting it is another part's job
    if status == "streaming":
        return None
    timeline = replica_source.timeline(source)
    if timeline is None:
        return None  # no primary now (a failover under way): nothing to follow yet

    def follows() -> bool:
        try:
            status, received, checkpoint = _receiver(replica)
        except (dbconn.DatabaseError, psycopg.Error):
            return True  # gone meanwhile: not ours to judge this pass
        return (status == "streaming" and received == timeline) or max(received or 0, checkpoint) >= timeline

    if wait_for(follows, NOT_STREAMING_FOR, interval=0.5):
        return None
    return _logged_reason(replica) or _(
        "its walreceiver does not stream and its timeline is behind its source's"
    )


def _logged_reason(replica: Cluster) -> str:
    """The last line of the replica's log that says why it cannot follow ("" if none)."""
    try:
        with replica.log_file.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - LOG_TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line for line in tail.splitlines() if DIVERGED_WORDS.search(line)]
    return lines[-1].split(":  ", 1)[-1].strip()[:300] if lines else ""


def heal(replica: Cluster, reason: str, *, attempt: int = 1) -> str:
    """Rewind the replica onto its source's timeline, or copy it again if that fails; online
    again with everything the user knows of it unchanged. A failed attempt leaves it ``error``
    with the reason and when the next one comes (``heal_diverged`` tries again). Returns a note
    for the reconciler."""
    if not Cluster.objects.filter(
        pk=replica.pk, status=ClusterStatus.ONLINE if attempt == 1 else ClusterStatus.ERROR
    ).update(
        status=ClusterStatus.CREATING,
        progress=1,  # not 0: the replica builder claims only replicas that wait at 0
        progress_message=_("Re-synchronising with its source"),
        updated_at=timezone.now(),
    ):
        return f"{replica.name}: changed meanwhile, not healed"
    replica.refresh_from_db()
    started = time.monotonic()
    if attempt == 1:
        transitions.log_event(
            replica,
            DIVERGED_EVENT,
            Message(
                N_(
                    "This replica cannot follow its source after a failover (%(reason)s): re-synchronising it."
                ),
                reason=reason,
            ),
            EventLevel.WARNING,
        )
    job = provision.Provisioning(replica)
    job.user = isolation.os_user(replica)
    keep = _keep_own_files(replica, again=attempt > 1)
    how = "pg_rewind"
    try:
        try:
            _rewind(job)
        except (EngineError, dbconn.DatabaseError, psycopg.Error, OSError) as exc:
            log.warning("rewinding replica %s failed, copying it again: %s", replica.pk, exc)
            how = "pg_basebackup"
            _rebuild(job)
        _restore_own_files(replica, keep, job)
        replica_build.start_and_stream(job)
        replica_build.follow_source_rows(replica)
    except Exception as exc:  # whatever it was, the replica waits in error for the next attempt
        if not isinstance(exc, EngineError | dbconn.DatabaseError | psycopg.Error | OSError):
            log.exception("re-synchronising replica %s crashed", replica.pk)
        return _attempt_failed(replica, attempt, exc)
    shutil.rmtree(keep, ignore_errors=True)
    seconds = round(time.monotonic() - started, 1)
    transitions.mark_online(replica)
    if attempt == 1:
        message = Message(
            N_("Replica re-synchronised after its source's failover in %(seconds)s s (%(how)s)."),
            seconds=seconds,
            how=how,
        )
    else:
        message = Message(
            N_(
                "Replica re-synchronised after its source's failover in %(seconds)s s (%(how)s), "
                "at attempt %(attempt)s."
            ),
            seconds=seconds,
            how=how,
            attempt=attempt,
        )
    transitions.log_event(replica, "replica-resynced", message)
    transaction.on_commit(lambda: hooks.replica_resynced(replica, message))
    return f"{replica.name}: re-synchronised with {how} in {seconds} s (attempt {attempt})"


def _attempt_failed(replica: Cluster, attempt: int, exc: BaseException) -> str:
    """The replica ``error`` with the reason on its page, an event for this attempt; the
    reconciler tries again after ``retry_after``."""
    log.warning("re-synchronising replica %s failed (attempt %s): %s", replica.pk, attempt, exc)
    message = Message(
        N_(
            "Re-synchronising the replica failed (attempt %(attempt)s): %(reason)s. Next attempt in %(seconds)s s."
        ),
        attempt=attempt,
        reason=failures.reason(exc),  # the engine's words were logged above
        seconds=round(retry_after(attempt)),
    )
    transitions.log_event(replica, FAILED_EVENT, message, EventLevel.ERROR)
    transitions.mark_error(replica, message_to_text(message))
    return f"{replica.name}: re-synchronising failed (attempt {attempt}): {exc}"


def _keep_own_files(replica: Cluster, *, again: bool = False) -> Path:
    """A copy of the replica's own files; ``again`` (a retry) keeps the copy an earlier attempt
    made, since that attempt may have removed the data directory."""
    keep = replica.data_root / KEEP_DIR
    if again and keep.is_dir() and any(keep.iterdir()):
        return keep
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(mode=0o700)
    for name in OWN_FILES:
        if (replica.pgdata / name).is_file():
            shutil.copy2(replica.pgdata / name, keep / name)
    return keep


def _restore_own_files(replica: Cluster, keep: Path, job: provision.Provisioning) -> None:
    """The replica's own files over the source's; its configuration written anew (standby.conf,
    standby.signal), and nothing of the source's quota stops or of Patroni left."""
    for kept in keep.iterdir():
        shutil.copy2(kept, replica.pgdata / kept.name)
    for name in (QUOTA_FILE, *replica_build.PATRONI_FILES, "backup_manifest"):
        (replica.pgdata / name).unlink(missing_ok=True)
    postgres.chown_tree(replica.pgdata, isolation.os_user(replica))
    provision.configure(job)


def _rewind(job: provision.Provisioning) -> None:
    """pg_rewind from the source's primary (a cluster with standbys; a one-member source has no
    superuser login over TCP, and no failover either)."""
    replica, source = job.cluster, job.cluster.replica_of
    assert source is not None
    if not source.is_ha:
        raise EngineError(_("Its source has no standby nodes to rewind from."))
    with dbconn.admin_connection(replica) as conn:
        row = conn.execute(
            "SELECT current_setting('data_checksums')::bool OR current_setting('wal_log_hints')::bool"
        ).fetchone()
    if not (row and row[0]):  # pg_rewind would refuse: it could not tell which pages changed
        raise EngineError(_("The replica has neither data checksums nor wal_log_hints."))
    user = isolation.os_user(replica)
    postgres.stop(replica.version, replica.pgdata, user=user, timeout=job.timeout)
    host, port = replica_source.primary_address(replica)
    # As the members rewind against each other: their role, never the superuser (whose password
    # would be in the environment of a process of the replica's OS user).
    conninfo = (
        f"host={host} port={port} user={settings.PANEL_MEMBER_ROLE} "
        f"dbname={dbconn.MAINTENANCE_DATABASE} connect_timeout=5"
    )
    postgres.rewind(
        replica.version,
        replica.pgdata,
        conninfo,
        password=ha_files.member_password(source),
        user=user,
        timeout=settings.PANEL_BACKUP_TIMEOUT,
    )


def _rebuild(job: provision.Provisioning) -> None:
    """A new base backup in the same place (the replica's slot, login files and user stay)."""
    replica = job.cluster
    postgres.kill(replica.pgdata)
    shutil.rmtree(replica.pgdata, ignore_errors=True)
    replica_build.base_backup(job)
