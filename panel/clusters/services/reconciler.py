"""The reconciler: one pass that brings the clusters back to what their rows say (the periodic
task, a worker's start and ``manage.py cluster reconcile`` all run it), and up to what the panel
creates today (the privilege guard in clusters created before it)."""

from __future__ import annotations

import datetime as dt
import logging
import os

from django.conf import settings
from django.utils import timezone

from panel import crypto
from panel.clusters import hooks, services
from panel.clusters.engine import dbconn, guard, isolation, panel_roles, postgres
from panel.clusters.lib import pgconf
from panel.clusters.lib.pgconf import STATEMENTS_LIBRARY, guard_lines
from panel.clusters.models import Cluster, ClusterStatus, CycleKind, EventLevel
from panel.clusters.replicas.services import replica_heal, replica_slots, streaming
from panel.clusters.services import cycles, firewall, lifecycle, new_password, transitions
from panel.clusters.services.provision import SETTINGS_FILE
from panel.clusters.standbys.services import entry_points, ha, ha_health, ha_roles, vip
from panel.core import osusers, runas
from panel.core.errors import N_, Message, ServiceError, message_to_text
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

STUCK_AFTER = dt.timedelta(minutes=10)


def reconcile() -> list[str]:
    """Bring back every online local cluster whose postmaster died; fail stuck creations; bring
    clusters from before up to date (own OS user, privilege guard, monitor role). The round's
    duration is recorded on this node (the Nodes page)."""
    with cycles.timed(CycleKind.RECONCILE):
        return _reconcile()


def _reconcile() -> list[str]:
    notes: list[str] = move_legacy_clusters()
    # Patroni supervises the members of a cluster with standbys; the reconciler supervises Patroni.
    notes += ha.supervise_all() + entry_points.supervise_here() + vip.supervise_here()
    for cluster in Cluster.objects.here().filter(status__in=ClusterStatus.SERVING, num_nodes__gt=1):
        notes += _restore_member_config(cluster)
        notes += ha_roles.upgrade(cluster)
        notes += replica_slots.keep_slots_declared(cluster)
        if note := firewall.reconcile_proxy(cluster):
            notes.append(note)
        # Patroni healed what it could (and Patroni itself is running again): the status says so.
        notes += ha_health.assess(cluster)
    for cluster in ha_health.watched_here():  # their own node is lost: this one keeps them true
        notes += ha_health.assess(cluster)
    # A replica left on its source's old timeline by a crash failover is rewound or copied again.
    notes += replica_heal.heal_diverged()
    notes += streaming.refresh_standbys()
    for cluster in Cluster.objects.here().filter(status__in=ClusterStatus.SERVING, num_nodes=1):
        if postgres.postmaster_pid(cluster.pgdata) is not None:
            continue
        # Re-read: a user may have stopped or deleted it since the query ran.
        if not Cluster.objects.filter(pk=cluster.pk, status__in=ClusterStatus.SERVING).update(
            status=ClusterStatus.DEGRADED, updated_at=timezone.now()
        ):
            continue
        cluster.refresh_from_db()
        transitions.log_event(
            cluster,
            "degraded",
            Message(N_("PostgreSQL was not running; starting it again.")),
            EventLevel.WARNING,
        )
        try:
            isolation.start_server(cluster, isolation.os_user(cluster), settings.PANEL_COMMAND_TIMEOUT)
        except EngineError as exc:
            log.warning("restarting %s failed: %s", cluster.pk, exc)  # pg_ctl's words: the log only
            transitions.log_event(
                cluster,
                "error",
                Message(N_("Restart failed. The panel's log holds the details for an administrator.")),
                EventLevel.ERROR,
            )
            notes.append(f"{cluster.name}: restart failed: {exc}")
            continue
        transitions.mark_online(cluster)
        transitions.log_event(cluster, "recovered", Message(N_("PostgreSQL restarted by the reconciler.")))
        notes.append(f"{cluster.name}: restarted")
    for cluster in Cluster.objects.here().filter(status__in=ClusterStatus.SERVING, num_nodes=1):
        pid = postgres.postmaster_pid(cluster.pgdata)
        if pid is None:
            continue
        configured = services.guard_configured(cluster)
        loaded = guard.is_loaded(pid)
        if not configured and loaded and _guard_preloaded(cluster):
            # Only what the guard reserves changed (a role of the panel's added): a reload does.
            notes += _update_reserved_roles(cluster)
        elif not configured or loaded is False:
            # The restart that loads the guard starts the server in its cgroup too.
            notes += _install_guard(cluster, configured=configured)
        else:
            if isolation.place_in_server_cgroup(cluster, pid):
                transitions.log_event(
                    cluster,
                    "limits",
                    Message(N_("The plan's memory and CPU limits now apply to this cluster.")),
                )
                notes.append(f"{cluster.name}: placed in its cgroup")
            notes += _write_json_log(cluster)
    stuck_before = timezone.now() - STUCK_AFTER
    for cluster in Cluster.objects.here().filter(status__in=ClusterStatus.BUSY, updated_at__lt=stuck_before):
        reason = Message(N_("The job working on this cluster was interrupted."))
        # Only if the job has not moved on since the query ran.
        if not Cluster.objects.filter(
            pk=cluster.pk, status=cluster.status, updated_at__lt=stuck_before
        ).update(
            status=ClusterStatus.ERROR,
            error_message=message_to_text(reason),
            progress_message="",
            updated_at=timezone.now(),
        ):
            continue
        transitions.log_event(cluster, "error", reason, EventLevel.ERROR)
        notes.append(f"{cluster.name}: marked error (stuck)")
    notes += create_missing_monitor_roles()
    notes += hooks.pooler.reconcile_all()
    return notes


def _write_json_log(cluster: Cluster) -> list[str]:
    """A cluster made before the Logs tab read structured records: its panel.conf rewritten and
    the server reloaded, so that it writes ``postgresql.json`` from now on (no restart needed)."""
    try:
        if pgconf.writes_json_log((cluster.pgdata / "panel.conf").read_text()):
            return []
        services.write_server_config(cluster)
        isolation.reload_server_config(cluster)
    except (OSError, EngineError, dbconn.DatabaseError) as exc:
        log.warning("switching %s to the JSON log failed: %s", cluster.name, exc)
        return [f"{cluster.name}: JSON log not switched on: {exc}"]
    return [f"{cluster.name}: JSON log switched on"]


def _guard_preloaded(cluster: Cluster) -> bool:
    """panel.conf preloads this panel's guard, whatever roles it reserves."""
    try:
        text = (cluster.pgdata / "panel.conf").read_text()
    except OSError:
        return False
    library = str(guard.library_path(cluster.version))
    lines = {line.strip() for line in text.splitlines()}
    return any(
        guard_lines(libraries, ())[0] in lines for libraries in ((library, STATEMENTS_LIBRARY), (library,))
    )


def _update_reserved_roles(cluster: Cluster) -> list[str]:
    """Write the guard's new reserved roles and reload (no restart), then take away what they
    now protect from the tenant's roles."""
    try:
        services.write_server_config(cluster)
        isolation.reload_server_config(cluster)
        if not cluster.is_replica:  # a replica's roles are its source's
            services.clear_reserved(cluster)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        return [f"{cluster.name}: updating the reserved roles failed: {exc}"]
    transitions.log_event(
        cluster,
        "guard-updated",
        Message(N_("The privilege guard now also reserves the panel's newer roles.")),
    )
    return [f"{cluster.name}: reserved roles updated"]


def _restore_member_config(cluster: Cluster) -> list[str]:
    """A member rewound with pg_rewind gets the panel's files in its data directory from another
    member, stale ones if member 1 (PGDATA, whose panel.conf every member includes) was the one
    rewound: written again, and the members reloaded when they differed."""
    path = cluster.pgdata / "panel.conf"
    try:
        before = [path.read_text(), (cluster.pgdata / SETTINGS_FILE).read_text()]
        services.write_server_config(cluster)
        after = [path.read_text(), (cluster.pgdata / SETTINGS_FILE).read_text()]
        if before == after:
            return []
        isolation.reload_server_config(cluster)
    except (EngineError, OSError, dbconn.DatabaseError) as exc:
        return [f"{cluster.name}: restoring the members' configuration failed: {exc}"]
    return [f"{cluster.name}: the members' configuration written again"]


def _install_guard(cluster: Cluster, *, configured: bool) -> list[str]:
    """Restart a cluster created before the privilege guard with it loaded, and take away what
    its roles were granted that the guard now refuses."""
    try:
        guard.ensure_built(cluster.version)
    except guard.GuardBuildError as exc:
        # Retried every pass; an event each time would bury the cluster's history.
        log.warning("privilege guard for %s not built: %s", cluster.name, exc)
        return [f"{cluster.name}: privilege guard not built: {exc}"]
    if not Cluster.objects.filter(pk=cluster.pk, status__in=ClusterStatus.SERVING).update(
        status=ClusterStatus.STARTING, updated_at=timezone.now()
    ):
        return []
    cluster.refresh_from_db()
    transitions.log_event(
        cluster,
        "guard-upgrade",
        Message(N_("This cluster predates the privilege guard: restarting it with the guard loaded.")),
        EventLevel.WARNING,
    )
    try:
        # With panel.conf lacking the guard, the restart writes it and clears the roles itself.
        services.perform_action(cluster, "restart")
        lifecycle.guard_loaded(cluster, guard_added=configured)
    except (ServiceError, dbconn.DatabaseError) as exc:
        message = exc.message if isinstance(exc, ServiceError) else str(exc)
        return [f"{cluster.name}: loading the privilege guard failed: {message}"]
    return [f"{cluster.name}: privilege guard loaded"]


# --- upgrade: clusters created when one OS user ran them all ------------------------------------

MOVABLE = frozenset({ClusterStatus.ONLINE, ClusterStatus.DEGRADED, ClusterStatus.STOPPED})


def move_legacy_clusters() -> list[str]:
    """Give every local cluster that still runs as the global runner a system user of its own
    (as root only; otherwise everything runs as ourselves anyway)."""
    if os.geteuid() != 0:
        return []
    postgres.make_clusters_dir()  # 0711 also where it was made before the clusters had users
    notes = []
    for cluster in Cluster.objects.here().filter(os_user_name="", status__in=MOVABLE):
        note = move_to_own_os_user(cluster)
        if note:
            notes.append(note)
    return notes


def move_to_own_os_user(cluster: Cluster) -> str | None:
    """Stop PgBouncer and PostgreSQL, give the data root to a new system user of the cluster's own,
    record it, and start both again if they were serving. A note when it acted."""
    was = cluster.status
    if not cluster.pgdata.is_dir():
        return None  # nothing on disk to move: the cluster's files are gone
    # Claimed like a user's stop, so no action or reconciler pass works on it meanwhile.
    if not Cluster.objects.filter(pk=cluster.pk, status=was, os_user_name="").update(
        status=ClusterStatus.STOPPING, updated_at=timezone.now()
    ):
        return None
    cluster.refresh_from_db()
    timeout = settings.PANEL_COMMAND_TIMEOUT
    try:
        hooks.pooler.stop_pgbouncer(cluster)
        postgres.stop(cluster.version, cluster.pgdata, user=isolation.os_user(cluster), timeout=timeout)
        user = osusers.ensure_system_user(cluster.own_os_user_name)
        postgres.chown_tree(cluster.data_root, user)
        # Recorded once it owns everything: until then the next pass starts over.
        cluster.os_user_name = user.name
        cluster.save(update_fields=["os_user_name", "updated_at"])
        # Files from before may hold a pool's role password; the next apply writes them anew.
        for stale in ("pgbouncer.ini", "pgbouncer.ini.prev"):
            (cluster.data_root / "pgbouncer" / stale).unlink(missing_ok=True)
        if was == ClusterStatus.STOPPED:
            # The start writes the configuration (peer map, privilege guard) and clears what the
            # guard refuses; writing it here would hide from that start that the guard is new.
            transitions.mark(cluster, ClusterStatus.STOPPED)
        else:
            guard_added = services.write_server_config(cluster)
            runas.make_private_dir(cluster.socket_dir, user)
            isolation.start_server(cluster, user, timeout)
            if guard_added:
                services.clear_reserved(cluster)
                transitions.log_event(
                    cluster, "guard-installed", Message(N_("The privilege guard is now loaded."))
                )
            transitions.mark_online(cluster)
            hooks.pooler.reapply_config(cluster)  # starts PgBouncer again if the cluster has pools
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        log.warning("moving %s to its own OS user failed: %s", cluster.pk, exc)
        # A serving cluster stays degraded, so the next pass tries again (and starts it).
        cluster.status = ClusterStatus.STOPPED if was == ClusterStatus.STOPPED else ClusterStatus.DEGRADED
        failed = Message(
            N_(
                "Could not move the cluster to a system user of its own. The panel's log holds the "
                "details for an administrator."
            )
        )
        cluster.error_message = message_to_text(failed)
        cluster.save(update_fields=["status", "error_message", "updated_at"])
        transitions.log_event(cluster, "error", failed, EventLevel.ERROR)
        return f"{cluster.name}: moving to its own OS user failed: {exc}"
    transitions.log_event(
        cluster,
        "os-user",
        Message(
            N_("The cluster now runs as a system user of its own, %(user)s, which alone can read its files."),
            user=cluster.os_user_name,
        ),
    )
    return f"{cluster.name}: now runs as {cluster.os_user_name}"


def create_missing_monitor_roles() -> list[str]:
    """Clusters provisioned before the monitor role existed are collected by the superuser no
    more: create the role on each running one (the upgrade path), once."""
    notes: list[str] = []
    for cluster in Cluster.objects.here().filter(
        status__in=ClusterStatus.SERVING, monitor_password_encrypted=""
    ):
        if postgres.postmaster_pid(cluster.pgdata) is None:
            continue
        password = new_password()
        encrypted = crypto.encrypt(password)
        # Claim it: two reconcilers at once must not each set a different password.
        if not Cluster.objects.filter(pk=cluster.pk, monitor_password_encrypted="").update(
            monitor_password_encrypted=encrypted
        ):
            continue
        cluster.monitor_password_encrypted = encrypted
        try:
            with dbconn.admin_connection(cluster) as conn:
                panel_roles.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, password)
        except (dbconn.DatabaseError, ValueError) as exc:
            # Released for the next pass (the server may be restarting).
            Cluster.objects.filter(pk=cluster.pk, monitor_password_encrypted=encrypted).update(
                monitor_password_encrypted=""
            )
            notes.append(f"{cluster.name}: monitoring role not created: {exc}")
            continue
        transitions.log_event(
            cluster,
            "monitor-role",
            Message(
                N_("Created the monitoring role %(role)s: statistics are now read without superuser rights."),
                role=settings.PANEL_MONITOR_ROLE,
            ),
        )
        notes.append(f"{cluster.name}: monitoring role created")
    return notes
