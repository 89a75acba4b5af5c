"""The render step of applying pools: both of PgBouncer's files as one state of the database means them.

Reads the pools, the users and their SCRAM secrets, turns them into the pure specs of
``lib.pgbouncer_spec`` and renders ``pgbouncer.ini`` and the auth file with ``lib``; writes nothing.
A pool whose fixed user is gone, or anything PgBouncer would misparse, is a ServiceError here,
before a byte is written.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from django.conf import settings

from panel import crypto
from panel.clusters.face import dbconn
from panel.clusters.models import Cluster
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.models.servers import server_host, server_port
from panel.core.errors import N_, ServiceError
from panel.pools.engine import supervisor
from panel.pools.engine.disk import BouncerFiles
from panel.pools.lib import pgbouncer_hba
from panel.pools.lib.authfile import AuthFileError, render_auth_file, scram_sha256_verifier
from panel.pools.lib.pgbouncer_ini import (
    ConfigError,
    GlobalSettings,
    PoolSpec,
    ServerTarget,
    render,
)
from panel.pools.models import ConnectionPool, Pooler

# PgBouncer's admin role exists only in its auth file. "pgbouncer" is a reserved role name on
# the clusters (lib.names), so no database user can collide with it.
ADMIN_ROLE = "pgbouncer"
# Clients beyond the pool sizes wait in PgBouncer's queue instead of being refused: ten times the
# 150-client story. One file descriptor each (see supervisor.fd_limits).
MAX_CLIENT_CONN = 1500


def get_pooler(cluster: Cluster) -> Pooler:
    pooler, _created = Pooler.objects.get_or_create(
        cluster=cluster, defaults={"admin_password_encrypted": crypto.encrypt(secrets.token_urlsafe(24))}
    )
    return pooler


def _admin_secret(cluster: Cluster, pooler: Pooler) -> str:
    # A salt fixed per cluster keeps the auth file byte-stable between applies.
    salt = hashlib.sha256(b"pgpanel-pgbouncer-admin" + cluster.pk.bytes).digest()[:16]
    return scram_sha256_verifier(pooler.admin_password, salt)


def _role_secrets(cluster: Cluster, names: list[str], port: int | None = None) -> dict[str, str]:
    """Each role's secret exactly as ``pg_authid`` stores it: SCRAM pass-through needs the same salt.
    ``port``: read on that member of this node (a standby's copy of ``pg_authid``)."""
    try:
        with dbconn.admin_connection(cluster, port=port) as conn:
            rows = conn.execute(
                "SELECT rolname, rolpassword FROM pg_catalog.pg_authid WHERE rolcanlogin AND rolname = ANY(%s)",
                [names],
            ).fetchall()
    except dbconn.DatabaseError as exc:
        raise ServiceError.because(
            N_("Could not read the users' secrets from PostgreSQL: %(reason)s"),
            "pool.secrets_unreadable",
            exc,
        ) from None
    return {name: secret for name, secret in rows if secret and secret.startswith("SCRAM-SHA-256$")}


def fds_needed(cluster: Cluster) -> int:
    return MAX_CLIENT_CONN + (cluster.pool_connections or 0) + supervisor.FD_MARGIN


def global_settings(cluster: Cluster, files: BouncerFiles) -> GlobalSettings:
    budget = cluster.pool_connections or 0
    _soft, hard, _granted = supervisor.fd_limits(fds_needed(cluster))
    # Never promise more clients than descriptors PgBouncer can open.
    max_client_conn = max(min(MAX_CLIENT_CONN, hard - budget - supervisor.FD_MARGIN), 1)
    return GlobalSettings(
        listen_port=files.port,
        unix_socket_dir=str(files.socket_dir),
        auth_file=str(files.auth),
        # Trusted sources: only the cluster's (lib.firewall) reach the pools over TCP.
        auth_type="hba",
        auth_hba_file=str(files.hba),
        logfile=str(files.logfile),
        pidfile=str(files.pidfile),
        client_tls_key_file=str(files.tls_key),
        client_tls_cert_file=str(files.tls_cert),
        admin_users=(ADMIN_ROLE,),
        listen_addr=settings.PANEL_LISTEN_ADDRESSES,
        max_client_conn=max_client_conn,
        server_idle_timeout=settings.PANEL_POOL_SERVER_IDLE_TIMEOUT,
        server_login_retry=1 if cluster.is_ha else None,
    )


def server_target(cluster: Cluster) -> ServerTarget:
    # The Unix socket spares PgBouncer a TCP and TLS round trip per server connection, and there
    # the server knows PgBouncer by its OS user (peer authentication): no password in any file.
    # With standbys: the primary member's port (Patroni's callback and the node agent repoint it);
    # a primary on another node over TCP at its node's address (TLS and SCRAM with the secrets of
    # the auth file, as clients reach it).
    return ServerTarget(server_host(cluster), server_port(cluster))


@dataclass(frozen=True)
class RenderedConfig:
    """Both files for one state of the database, and what they were rendered from."""

    ini: str
    auth: str
    hba: str
    specs: list[PoolSpec]
    settings: GlobalSettings
    target: ServerTarget

    def ini_without(self, names: set[str]) -> str:
        return render(self.settings, self.target, [s for s in self.specs if s.name not in names])


def render_config(
    cluster: Cluster,
    pools: list[ConnectionPool],
    pooler: Pooler,
    files: BouncerFiles,
    *,
    target: ServerTarget | None = None,
    secrets_port: int | None = None,
) -> RenderedConfig:
    """Both files for ``pools``; ServiceError if they cannot be rendered as meant. ``target`` and
    ``secrets_port``: the pools on another node than the cluster's (``services.entries``), which
    reach the primary through that node's HAProxy and read the secrets from its member."""
    users = {u.name: u for u in cluster.users.all() if u.name != ADMIN_ROLE}
    specs = []
    for pool in pools:
        if pool.user and pool.user not in users:
            raise ServiceError(
                N_("Pool “%(pool)s” uses the user “%(user)s”, which no longer exists."),
                code="pool.user_gone",
                params={"pool": pool.name, "user": pool.user},
            )
        specs.append(PoolSpec(pool.name, pool.database, pool.user or None, pool.mode, pool.size))
    role_secrets = _role_secrets(cluster, sorted(users), secrets_port)
    role_secrets[ADMIN_ROLE] = _admin_secret(cluster, pooler)
    gs, target = global_settings(cluster, files), target or server_target(cluster)
    try:
        ini = render(gs, target, specs)
        auth = render_auth_file(role_secrets)
    except (ConfigError, AuthFileError) as exc:
        # The lib's own checks of what it writes: technical, their detail stays in English.
        raise ServiceError(
            N_("PgBouncer's configuration was refused before it was written: %(detail)s"),
            code="pool.config_invalid",
            params={"detail": exc},
        ) from None
    hba = pgbouncer_hba.render(trusted_source_values(cluster))
    return RenderedConfig(ini, auth, hba, specs, gs, target)
