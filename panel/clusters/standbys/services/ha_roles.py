"""The logins of a cluster with standbys' own machinery, so that no file of the cluster holds the
panel superuser's password: Patroni logs in locally as the superuser over the socket by peer
authentication (pg_hba.conf and pg_ident.conf, ``lib.pgconf``), and the members stream from and
rewind against each other as a role of their own (``settings.PANEL_MEMBER_ROLE``) with only what
replication and pg_rewind need; its password (``ha_files.member_password``) is the one in
Patroni's files.

Clusters made before are brought to this by the reconciler (``upgrade``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.engine import dbconn, isolation, panel_roles
from panel.clusters.models import Cluster, ClusterMember, ClusterStatus, credentials
from panel.clusters.standbys.engine import member_tls, patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import ha_files
from panel.core import runas
from panel.core.polling import wait_for
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

# What pg_rewind reads on its source (Patroni's documented list for a rewind user).
REWIND_FUNCTIONS = (
    "pg_catalog.pg_ls_dir(text, boolean, boolean)",
    "pg_catalog.pg_stat_file(text, boolean)",
    "pg_catalog.pg_read_binary_file(text)",
    "pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)",
)


def ensure_member_role(cluster: Cluster, timeout: float = 30.0) -> None:
    """The members' role on the primary, created or repaired (its standbys get it by streaming).
    The primary is asked of the servers themselves: the rows may not know it yet, and a primary
    Patroni has just promoted may still refuse connections for a moment (asked again for up to
    ``timeout`` seconds). A role of that name the panel did not make is refused at once."""
    seen: list[str] = []

    def attempt() -> bool:
        for member in ha_files.members_of(cluster):
            if member.is_remote:
                continue
            try:
                with dbconn.admin_connection(cluster, port=int(member.port)) as conn:
                    row = conn.execute("SELECT pg_catalog.pg_is_in_recovery()").fetchone()
                    if row and row[0]:
                        continue
                    ensure_role(conn, settings.PANEL_MEMBER_ROLE, ha_files.member_password(cluster))
                    return True
            except panel_roles.NotPanelRole as exc:
                raise EngineError(str(exc)) from None
            except dbconn.DatabaseError as exc:
                seen.append(f"{member.name}: {exc}")
                log.info("member %s of %s: %s", member.name, cluster.pk, exc)
        return False

    if not wait_for(attempt, timeout, interval=0.5):
        log.warning("no primary of %s answered for %s: %s", cluster.pk, settings.PANEL_MEMBER_ROLE, seen[-1:])
        raise EngineError(f"No primary on this node to create {settings.PANEL_MEMBER_ROLE} on.")


def ensure_role(conn: psycopg.Connection, role: str, password: str) -> None:
    """LOGIN REPLICATION with ``password``, pg_rewind's functions and CONNECT to the maintenance
    database; no other attribute, no membership, no member."""
    ident = sql.Identifier(role)
    attributes = sql.SQL(
        "LOGIN REPLICATION NOINHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS PASSWORD {}"
    ).format(sql.Literal(dbconn.scram_verifier(conn, role, password)))
    with conn.transaction():
        # Durable here, not waiting for a synchronous standby: there may be none yet (a cluster
        # taking its standbys on creates this role before they start), and they replay it anyway.
        conn.execute("SET LOCAL synchronous_commit = local")
        # A role of that name the panel did not make is refused, not adopted (panel_roles.claim).
        panel_roles.ensure(conn, role, attributes, known_password=lambda: password)
        for function in REWIND_FUNCTIONS:
            conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(function), ident))
        panel_roles.grant_maintenance_connect(conn, role)


def upgrade(cluster: Cluster) -> list[str]:
    """The reconciler's part on the cluster's node, for its members there (``upgrade_here``)."""
    return upgrade_here(cluster, [m for m in ha_files.members_of(cluster) if not m.is_remote])


def upgrade_here(cluster: Cluster, here: list[ClusterMember]) -> list[str]:
    """The reconciler's part for the members ``here`` (on this node: the cluster's node's
    reconciler, or the agent's of another node, ``upgrade_members_here``).

    Members whose Patroni files are from before (they hold the superuser's password) get the
    members' role (made on the primary by the cluster's node; another node waits until its member
    has it by streaming), pg_hba.conf and pg_ident.conf that let it and Patroni's peer login in
    (loaded), then Patroni's files written again (the passfile first) and read again by each
    Patroni. Then the member CA's certificates (``certificates``).

    Every round looks first, reading files only: members whose files are current cost no
    connection, no write, no reload and no signal. Members with something out of date are changed
    only while the cluster is steady (``unsteady``): a Patroni that is starting, a standby not
    streaming or a cluster without a running primary (a failover on its way) is left alone until a
    later round, so a reload never lands in a failover's window."""
    if not here:
        return []
    user = isolation.os_user(cluster)
    off = _holds_superuser(cluster, here)
    stale = _stale_certificates(cluster, here)
    pending = [
        *(["Patroni's files hold the superuser's password"] if off else []),
        *([f"{m.name}'s Patroni names no member certificate" for m in stale]),
        *([] if isolation.auth_config_current(cluster, user) else ["pg_hba.conf or pg_ident.conf"]),
    ]
    if not pending:
        return []
    if reason := unsteady(here):
        return [f"{cluster.name}: {'; '.join(pending)}: brought up to date later ({reason})"]
    notes = _off_the_superuser(cluster, here, user) if off else []
    return notes + certificates(cluster, here, user)


def unsteady(here: list[ClusterMember]) -> str | None:
    """Why the members ``here`` are not to be touched now; None when they may be: each one's own
    Patroni answers (``GET /patroni``: its live view, not the consensus store's, which keeps a
    killed Patroni's last word for a while) that its server runs, as the primary or as a standby
    that streams, and its ``GET /cluster`` names one running primary."""
    for member in here:
        status, text = patroni.rest("GET", member.rest_port, "/patroni", timeout=2, host=member.host)
        if status != 200:
            return f"Patroni of {member.name} does not answer"
        code, listing = patroni.rest("GET", member.rest_port, "/cluster", timeout=2, host=member.host)
        own: object = None
        statuses: list[patroni_lib.MemberStatus] = []
        try:
            own = json.loads(text)
            statuses = patroni_lib.parse_cluster(listing) if code == 200 else []
        except (ValueError, AttributeError):
            own = None
        if not isinstance(own, dict):
            return f"Patroni of {member.name} answers what cannot be read"
        primary = own.get("role") in patroni_lib.PRIMARY_ROLES
        if own.get("state") != "running" or not (primary or own.get("replication_state") == "streaming"):
            return f"{member.name} is {own.get('state')}, {own.get('replication_state', own.get('role'))}"
        if len([s for s in statuses if s.is_primary and s.state == "running"]) != 1:
            return "no running primary"
    return None


def _holds_superuser(cluster: Cluster, here: list[ClusterMember]) -> bool:
    secret = credentials.superuser_password(cluster)
    paths = [ha_files.member_config_path(cluster, m) for m in here]
    passfiles = [ha_files.ha_dir(cluster) / f"{m.name}.pgpass" for m in here]
    return any(_holds(path, secret) for path in [*paths, *passfiles])


def _off_the_superuser(cluster: Cluster, here: list[ClusterMember], user: runas.OsUser) -> list[str]:
    paths = [ha_files.member_config_path(cluster, m) for m in here]
    passfiles = [ha_files.ha_dir(cluster) / f"{m.name}.pgpass" for m in here]
    try:
        if any(m.is_remote for m in here):
            if not _role_streamed(cluster, here):
                return [f"{cluster.name}: {settings.PANEL_MEMBER_ROLE} not on this node's members yet"]
        else:
            ensure_member_role(cluster)
        isolation.write_auth_config(cluster, user)
        _reload(cluster, here)
        line = f"*:*:*:{settings.PANEL_MEMBER_ROLE}:{ha_files.member_password(cluster)}\n"
        for passfile in passfiles:
            runas.write_private_file(passfile, line, owner=user)
        for member, path in zip(here, paths, strict=True):
            if _rewrite_member_config(cluster, member, user):
                patroni.reload_member(path)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        return [f"{cluster.name}: moving Patroni's logins off the superuser's password failed: {exc}"]
    return [
        f"{cluster.name}: Patroni logs in by peer authentication and streams as {settings.PANEL_MEMBER_ROLE}"
    ]


def certificates(cluster: Cluster, here: list[ClusterMember], user: runas.OsUser) -> list[str]:
    """Members from before the member CA (``lib.member_tls``): Patroni's configuration written
    again (with it the client certificate and the members' ``ssl_ca_file`` that trusts the member
    CA), each Patroni reloaded (which reloads its server), then pg_hba.conf asking other nodes'
    addresses for the certificate, the servers reloaded. A member of another node takes it at its
    own node's reconciler round (until then its peers' certificates may be refused there, and
    streaming to or from it waits for that round). Nothing current is written or reloaded."""
    try:
        stale = _stale_certificates(cluster, here)
        reloaded = [m for m in stale if _rewrite_member_config(cluster, m, user)]
        for member in reloaded:
            patroni.reload_member(ha_files.member_config_path(cluster, member))
        asked = isolation.write_auth_config(cluster, user)
        if asked:
            _reload(cluster, here)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        return [f"{cluster.name}: the members' client certificates: {exc}"]
    if not (reloaded or asked):
        return []
    return [f"{cluster.name}: members on other nodes log in with the member CA's certificates"]


def _stale_certificates(cluster: Cluster, here: list[ClusterMember]) -> list[ClusterMember]:
    """The members ``here`` whose Patroni configuration names no member CA files, or others."""
    directory = ha_files.ha_dir(cluster)
    wanted = (str(member_tls.client_paths(directory)[0]), str(member_tls.ssl_ca_path(directory)))
    return [m for m in here if _certificate_settings(cluster, m) not in (wanted, None)]


def _certificate_settings(cluster: Cluster, member: ClusterMember) -> tuple[str, str] | None:
    """The client certificate and ``ssl_ca_file`` the member's Patroni configuration names (None:
    not written yet, whoever starts the member writes it)."""
    try:
        written = json.loads(ha_files.member_config_path(cluster, member).read_text())
    except (OSError, ValueError):
        return None
    postgresql = written.get("postgresql", {})
    cert = postgresql.get("authentication", {}).get("replication", {}).get("sslcert", "")
    return cert, postgresql.get("parameters", {}).get("ssl_ca_file", "")


def _rewrite_member_config(cluster: Cluster, member: ClusterMember, user: runas.OsUser) -> bool:
    """One member's Patroni configuration written again, its cascade tag kept; True if its text
    changed (only then is its Patroni to read it again)."""
    path = ha_files.member_config_path(cluster, member)
    try:
        before = path.read_text()
        written = json.loads(before)
    except (OSError, ValueError):
        before, written = "", {}
    upstream = written.get("tags", {}).get("replicatefrom")
    replicate_from = {member.name: upstream} if upstream else None
    ha_files.write_member_config(cluster, member, user, replicate_from=replicate_from)
    return path.read_text() != before


def _reload(cluster: Cluster, here: list[ClusterMember]) -> None:
    """Every running member ``here`` reloads its server configuration (one that is down reads it
    when Patroni starts it)."""
    for member in here:
        try:
            isolation.reload_member(cluster, int(member.port))
        except dbconn.DatabaseError as exc:
            log.info("member %s of %s not reloaded: %s", member.name, cluster.pk, exc)


def _role_streamed(cluster: Cluster, here: list[ClusterMember]) -> bool:
    """Whether a member here already has the members' role (streamed from the primary)."""
    for member in here:
        try:
            with dbconn.admin_connection(cluster, port=int(member.port)) as conn:
                row = conn.execute(
                    "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [settings.PANEL_MEMBER_ROLE]
                ).fetchone()
        except dbconn.DatabaseError:
            continue
        if row:
            return True
    return False


def _holds(path: Path, secret: str) -> bool:
    try:
        return secret in path.read_text()
    except OSError:
        return False


def upgrade_members_here() -> list[str]:
    """``upgrade_here`` for the members on this node of clusters living on another."""
    here = ClusterMember.objects.filter(
        node__name=settings.PANEL_NODE_NAME, cluster__status__in=ClusterStatus.SERVING
    ).exclude(cluster__node__name=settings.PANEL_NODE_NAME)
    by_cluster: dict[object, list[ClusterMember]] = {}
    for member in here.select_related("cluster", "node").order_by("name"):
        by_cluster.setdefault(member.cluster_id, []).append(member)
    return [note for members in by_cluster.values() for note in upgrade_here(members[0].cluster, members)]
