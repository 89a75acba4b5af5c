"""What the cluster services and the reconciler ask of the pools: guards, auth refresh, stop, restart."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from panel.clusters.face import ha, transitions
from panel.clusters.models import Cluster, ClusterStatus, EventLevel, MemberRole
from panel.clusters.models.firewall import trusted_source_values
from panel.core.errors import N_, Message, ServiceError, message_to_text, shown_text
from panel.pools.engine import disk, supervisor
from panel.pools.engine.apply import apply_config
from panel.pools.engine.disk import bouncer_files
from panel.pools.engine.rendering import server_target
from panel.pools.lib import pgbouncer_hba, pgbouncer_ini
from panel.pools.models import Pooler, PoolerStatus
from panel.pools.services import entries

log = logging.getLogger(__name__)

# --- hooks for the cluster services ----------------------------------------------------------------


def ensure_not_used(cluster: Cluster, *, database: str | None = None, user: str | None = None) -> None:
    """Refuse to delete a database or user that a pool uses, naming the pool(s)."""
    checks = (
        (
            "database",
            database,
            N_("The database “%(name)s” is used by the pool(s) %(pools)s; delete or change them first."),
        ),
        (
            "user",
            user,
            N_("The user “%(name)s” is used by the pool(s) %(pools)s; delete or change them first."),
        ),
    )
    for column, value, message in checks:
        if value is None:
            continue
        names = list(cluster.pools.filter(**{column: value}).values_list("name", flat=True))
        if names:
            raise ServiceError(
                message,
                code=f"pool.{column}_in_use",
                params={"name": value, "pools": ", ".join(f"“{n}”" for n in names)},
            )


def pool_sizes(cluster: Cluster) -> dict[str, int]:
    """Each pool's size by name: what a smaller plan's pool budget must hold (a resize)."""
    return dict(cluster.pools.order_by("name").values_list("name", "size"))


def _record_failure(cluster: Cluster, exc: ServiceError) -> None:
    """Kept as the coded message, rendered in the reader's language where the page shows it."""
    words = exc.as_message()
    kept = message_to_text(words) if isinstance(words, Message) else words
    Pooler.objects.filter(cluster=cluster).update(status=PoolerStatus.ERROR, error_message=kept)


def reapply_config(cluster: Cluster) -> str | None:
    """PgBouncer's whole configuration rendered and applied again (its server target, auth file and
    trusted sources), here and on the other member nodes' entries, after anything it is made of
    changed: a user added, deleted or given a new password, the primary moved, the sources.

    Never raises: the role change already happened in PostgreSQL. A failure is recorded on the
    pooler and in the cluster's events, and returned.
    """
    if not cluster.is_local or not cluster.pools.exists():
        return None
    try:
        apply_config(cluster)
    except ServiceError as exc:
        _record_failure(cluster, exc)
        transitions.log_event(cluster, "pooler-error", exc.as_message(), EventLevel.ERROR)
        return exc.message
    transaction.on_commit(lambda: entries.push(cluster))  # the pools on the other member nodes
    return None


def stop_pgbouncer(cluster: Cluster) -> bool:
    """Before the cluster stops or is deleted; True if PgBouncer was running."""
    if not cluster.is_local or not cluster.pooler_port:
        return False
    stopped = supervisor.stop(bouncer_files(cluster))
    Pooler.objects.filter(cluster=cluster).update(status=PoolerStatus.STOPPED, error_message="")
    return stopped


def _idle_timeout_current(files: disk.BouncerFiles) -> bool:
    """Whether the running ``pgbouncer.ini`` has today's ``server_idle_timeout`` (True if unreadable)."""
    try:
        ini = files.ini.read_text()
    except OSError:
        return True
    return f"\nserver_idle_timeout = {settings.PANEL_POOL_SERVER_IDLE_TIMEOUT}\n" in ini


def _trusted_sources_current(cluster: Cluster, files: disk.BouncerFiles) -> bool:
    """Whether PgBouncer's files carry the cluster's trusted sources: ``auth_type = hba`` with the
    hba file rendered from the rows (True if the ini is unreadable)."""
    try:
        ini = files.ini.read_text()
    except OSError:
        return True
    if "\nauth_type = hba\n" not in ini or f"\nauth_hba_file = {files.hba}\n" not in ini:
        return False
    return disk.read_text(files.hba) == pgbouncer_hba.render(trusted_source_values(cluster))


def _target_current(cluster: Cluster, files: disk.BouncerFiles) -> bool:
    """Whether the pools point at the primary the member rows name (True where that cannot be
    said). A node back after a failover recorded elsewhere (``ha_health.watched_here``) finds the
    rows on the new primary and its PgBouncer still on the old one, and no change left for its
    member watch to see. Patroni must name the rows' primary too before the file is rewritten:
    during a switchover its callback repoints the pools before the rows follow."""
    if not cluster.is_ha:
        return True
    try:
        pointed = {
            (params.get("host"), params.get("port"))
            for params in pgbouncer_ini.parse_databases_section(files.ini.read_text()).values()
        }
    except (OSError, pgbouncer_ini.ConfigError):
        return True
    target = server_target(cluster)
    if not pointed or pointed == {(target.host, str(target.port))}:
        return True
    primary = cluster.members.filter(role=MemberRole.PRIMARY).first()
    leader = next((s for s in ha.read_statuses(cluster) if s.is_primary and s.state == "running"), None)
    return primary is None or leader is None or leader.name != primary.name


def reconcile_pgbouncer(cluster: Cluster) -> str | None:
    """Keep PgBouncer running while the cluster serves and has pools; a note when it acted."""
    if not cluster.is_local or not cluster.pooler_port:
        return None
    files = bouncer_files(cluster)
    running = supervisor.running_pid(files) is not None
    if not cluster.pools.exists():
        if running:
            stop_pgbouncer(cluster)
            return f"{cluster.name}: PgBouncer stopped (no pools)"
        return None
    if not cluster.is_serving:
        return None
    pooler = Pooler.objects.filter(cluster=cluster).first()
    if running and (pooler is None or pooler.status != PoolerStatus.ERROR):
        # Files that no longer say what the rows do are rewritten, the first such found each round:
        # a node back after a failover recorded elsewhere (its pools on the old primary); files
        # from before trusted sources (no hba file: every address) or a change that did not reach
        # them; a file from before the idle timeout changed (PgBouncer's 600 s before issue 11).
        idle = f"server_idle_timeout set to {settings.PANEL_POOL_SERVER_IDLE_TIMEOUT} s"
        for current, done, failed in (
            (
                lambda: _target_current(cluster, files),
                "repointed at the primary",
                "not repointed at the primary",
            ),
            (
                lambda: _trusted_sources_current(cluster, files),
                "trusted sources brought up to date",
                "trusted sources not updated",
            ),
            (lambda: _idle_timeout_current(files), idle, "idle timeout not updated"),
        ):
            if current():
                continue
            try:
                apply_config(cluster)
            except ServiceError as exc:
                return f"{cluster.name}: PgBouncer {failed}: {exc.message}"
            return f"{cluster.name}: PgBouncer {done}"
        return None
    if not running:
        transitions.log_event(
            cluster,
            "pooler-down",
            Message(N_("PgBouncer was not running; starting it again.")),
            EventLevel.WARNING,
        )
    try:
        apply_config(cluster)
    except ServiceError as exc:
        already = pooler is not None and shown_text(pooler.error_message) == exc.message
        _record_failure(cluster, exc)
        if not already:
            transitions.log_event(cluster, "pooler-error", exc.as_message(), EventLevel.ERROR)
        return f"{cluster.name}: PgBouncer failed: {exc.message}"
    transitions.log_event(cluster, "pooler-recovered", Message(N_("PgBouncer restarted by the reconciler.")))
    return f"{cluster.name}: PgBouncer restarted"


def reconcile_all() -> list[str]:
    """``reconcile_pgbouncer`` for every local cluster that serves or still runs a PgBouncer, and
    the pools of the clusters with an entry on this node (``entries``)."""
    notes = entries.reconcile_here()
    for cluster in Cluster.objects.here().filter(status__in=ClusterStatus.SERVING):
        note = reconcile_pgbouncer(cluster)
        if note:
            notes.append(note)
    return notes
