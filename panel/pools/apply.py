"""Applying a cluster's pools to its PgBouncer: render, validate, write, (re)load, verify, roll back.

The one path every change takes (web, command line, reconciler). RELOAD answers success even
when PgBouncer stopped reading a broken file, so nothing counts as applied until SHOW DATABASES
matches what was meant; on a mismatch the previous files are put back in force.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from panel import crypto
from panel.clusters import dbconn, isolation
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.runas import EngineError
from panel.pools import console, supervisor
from panel.pools.lib.admin_console import diff_databases
from panel.pools.lib.authfile import AuthFileError, render_auth_file, scram_sha256_verifier
from panel.pools.lib.pgbouncer_ini import (
    ConfigError,
    GlobalSettings,
    PoolSpec,
    ServerTarget,
    render,
)
from panel.pools.models import ConnectionPool, Pooler, PoolerStatus

log = logging.getLogger(__name__)

# PgBouncer's admin role exists only in its auth file. "pgbouncer" is a reserved role name on
# the clusters (lib.names), so no database user can collide with it.
ADMIN_ROLE = "pgbouncer"
# Clients beyond the pool sizes wait in PgBouncer's queue instead of being refused: ten times the
# 150-client story. One file descriptor each (see supervisor.fd_limits).
MAX_CLIENT_CONN = 1500
START_TIMEOUT = 10


def bouncer_files(cluster: Cluster) -> supervisor.BouncerFiles:
    # The cluster's own socket directory keeps the socket path short (< 100 bytes); PostgreSQL's
    # socket there uses another port number.
    return supervisor.BouncerFiles(
        cluster.data_root / "pgbouncer",
        cluster.socket_dir,
        int(cluster.pooler_port or 0),
        cluster.os_user_name,
    )


def get_pooler(cluster: Cluster) -> Pooler:
    pooler, _created = Pooler.objects.get_or_create(
        cluster=cluster, defaults={"admin_password_encrypted": crypto.encrypt(secrets.token_urlsafe(24))}
    )
    return pooler


@contextmanager
def admin_console(cluster: Cluster, pooler: Pooler | None = None) -> Iterator[console.Connection]:
    files = bouncer_files(cluster)
    password = (pooler or get_pooler(cluster)).admin_password
    with console.connect(files.socket_dir, files.port, ADMIN_ROLE, password) as conn:
        yield conn


def lock_cluster(cluster: Cluster) -> Cluster:
    """Re-read the cluster row under a lock held until the transaction ends."""
    return Cluster.objects.select_for_update().get(pk=cluster.pk)


# --- applying the configuration --------------------------------------------------------------------


class _Mismatch(Exception):
    pass


def _admin_secret(cluster: Cluster, pooler: Pooler) -> str:
    # A salt fixed per cluster keeps the auth file byte-stable between applies.
    salt = hashlib.sha256(b"pgpanel-pgbouncer-admin" + cluster.pk.bytes).digest()[:16]
    return scram_sha256_verifier(pooler.admin_password, salt)


def _role_secrets(cluster: Cluster, names: list[str]) -> dict[str, str]:
    """Each role's secret exactly as ``pg_authid`` stores it: SCRAM pass-through needs the same salt."""
    try:
        with dbconn.admin_connection(cluster) as conn:
            rows = conn.execute(
                "SELECT rolname, rolpassword FROM pg_catalog.pg_authid WHERE rolcanlogin AND rolname = ANY(%s)",
                [names],
            ).fetchall()
    except dbconn.DatabaseError as exc:
        raise ServiceError(
            _("Could not read the users' secrets from PostgreSQL: %(reason)s") % {"reason": exc}
        ) from None
    return {name: secret for name, secret in rows if secret and secret.startswith("SCRAM-SHA-256$")}


def fds_needed(cluster: Cluster) -> int:
    return MAX_CLIENT_CONN + (cluster.pool_connections or 0) + supervisor.FD_MARGIN


def global_settings(cluster: Cluster, files: supervisor.BouncerFiles) -> GlobalSettings:
    budget = cluster.pool_connections or 0
    _soft, hard, _granted = supervisor.fd_limits(fds_needed(cluster))
    # Never promise more clients than descriptors PgBouncer can open.
    max_client_conn = max(min(MAX_CLIENT_CONN, hard - budget - supervisor.FD_MARGIN), 1)
    return GlobalSettings(
        listen_port=files.port,
        unix_socket_dir=str(files.socket_dir),
        auth_file=str(files.auth),
        logfile=str(files.logfile),
        pidfile=str(files.pidfile),
        client_tls_key_file=str(files.tls_key),
        client_tls_cert_file=str(files.tls_cert),
        admin_users=(ADMIN_ROLE,),
        listen_addr=settings.PANEL_LISTEN_ADDRESSES,
        max_client_conn=max_client_conn,
        server_idle_timeout=settings.PANEL_POOL_SERVER_IDLE_TIMEOUT,
    )


def server_target(cluster: Cluster) -> ServerTarget:
    # The Unix socket spares PgBouncer a TCP and TLS round trip per server connection, and there
    # the server knows PgBouncer by its OS user (peer authentication): no password in any file.
    return ServerTarget(str(cluster.socket_dir), int(cluster.port or 0))


@dataclass(frozen=True)
class RenderedConfig:
    """Both files for one state of the database, and what they were rendered from."""

    ini: str
    auth: str
    specs: list[PoolSpec]
    settings: GlobalSettings
    target: ServerTarget

    def ini_without(self, names: set[str]) -> str:
        return render(self.settings, self.target, [s for s in self.specs if s.name not in names])


def render_config(
    cluster: Cluster, pools: list[ConnectionPool], pooler: Pooler, files: supervisor.BouncerFiles
) -> RenderedConfig:
    """Both files for ``pools``; ServiceError if they cannot be rendered as meant."""
    users = {u.name: u for u in cluster.users.all() if u.name != ADMIN_ROLE}
    specs = []
    for pool in pools:
        if pool.user and pool.user not in users:
            raise ServiceError(
                _("Pool “%(pool)s” uses the user “%(user)s”, which no longer exists.")
                % {"pool": pool.name, "user": pool.user}
            )
        specs.append(PoolSpec(pool.name, pool.database, pool.user or None, pool.mode, pool.size))
    role_secrets = _role_secrets(cluster, sorted(users))
    role_secrets[ADMIN_ROLE] = _admin_secret(cluster, pooler)
    gs, target = global_settings(cluster, files), server_target(cluster)
    try:
        ini = render(gs, target, specs)
        auth = render_auth_file(role_secrets)
    except (ConfigError, AuthFileError) as exc:
        raise ServiceError(str(exc)) from None
    return RenderedConfig(ini, auth, specs, gs, target)


def _refresh_server_auth(cluster: Cluster) -> None:
    try:
        isolation.refresh_server_auth(cluster)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        raise ServiceError(
            _("Could not update how the server authenticates PgBouncer: %(reason)s") % {"reason": exc}
        ) from None


def _verify(conn: console.Connection, config: RenderedConfig) -> None:
    problems = diff_databases(config.specs, console.show_databases(conn), target=config.target)
    if problems:
        raise _Mismatch(" ".join(problems))


def _reload(cluster: Cluster, pooler: Pooler, files: supervisor.BouncerFiles, config: RenderedConfig) -> None:
    """RELOAD the installed files, then verify."""
    with admin_console(cluster, pooler) as conn:
        loaded = {row.name: row for row in console.show_databases(conn)}
        # PgBouncer 1.18 cannot change a pool's forced user on RELOAD: losing it is refused ("losing
        # forced user not supported") and gaining one crashes it at the next login ("put_in_order:
        # found existing elem"). Such a pool is removed by one RELOAD and added back by the next,
        # which reconnects its clients only.
        regained = {
            s.name for s in config.specs if s.name in loaded and (loaded[s.name].force_user or None) != s.user
        }
        if regained:
            supervisor.write_file(files, files.ini, config.ini_without(regained))
            console.reload(conn)
            supervisor.write_file(files, files.ini, config.ini)
        console.reload(conn)
        # RELOAD is done when it answers, so the same console connection sees its result.
        _verify(conn, config)


def _roll_back(
    cluster: Cluster, pooler: Pooler, files: supervisor.BouncerFiles, *, was_running: bool
) -> None:
    """Put the previous files back in force; best effort, the caller reports the first failure."""
    restored = supervisor.restore_previous(files)
    try:
        if was_running and supervisor.running_pid(files) is not None:
            with admin_console(cluster, pooler) as conn:
                console.reload(conn)
        else:
            supervisor.stop(files)
            if was_running and restored:
                supervisor.start(files, fds_needed=fds_needed(cluster), timeout=START_TIMEOUT)
    except (supervisor.SupervisorError, console.ConsoleError) as exc:
        log.warning("rolling back PgBouncer of %s: %s", cluster.pk, exc)


def apply_config(cluster: Cluster) -> None:
    """Make PgBouncer serve exactly the cluster's pools, or leave the previous configuration in force.

    Returns once every pool is usable; stops PgBouncer when the cluster has no pool left.
    Raises ServiceError with PgBouncer's own log line when the new configuration did not load.
    """
    if not cluster.is_local or not cluster.pooler_port:
        raise ServiceError(_("Connection pools are available for clusters provisioned by this panel."))
    with transaction.atomic():
        cluster = lock_cluster(cluster)
        pooler = get_pooler(cluster)
        files = bouncer_files(cluster)
        pools = list(cluster.pools.order_by("name"))
        if not pools:
            # Nothing to serve: no process to supervise. The pooler port stays reserved for the
            # cluster in the database, so the next pool can take it again.
            supervisor.stop(files)
            if pooler.status != PoolerStatus.STOPPED:
                pooler.mark_stopped()
            return
        try:
            supervisor.check_socket_path(files)
        except supervisor.SupervisorError as exc:
            raise ServiceError(str(exc)) from None
        config = render_config(cluster, pools, pooler, files)
        # PgBouncer logs in by peer authentication: the server must know every pool's role first.
        _refresh_server_auth(cluster)

        was_running = supervisor.running_pid(files) is not None
        try:
            supervisor.prepare_directory(files)
            # Clients see the cluster's own certificate, so the cluster's CA verifies both.
            supervisor.copy_private(files, cluster.pgdata / "server.crt", files.tls_cert)
            supervisor.copy_private(files, cluster.pgdata / "server.key", files.tls_key)
            old_ini = supervisor.read_text(files.ini)
            restart = was_running and supervisor.needs_restart(old_ini, config.ini)
            offset = supervisor.log_size(files)
            supervisor.install(files, config.ini, config.auth)
        except OSError as exc:
            raise ServiceError(
                _("Could not write PgBouncer's files: %(reason)s") % {"reason": exc.strerror or exc}
            ) from None
        except EngineError as exc:
            raise ServiceError(str(exc)) from None
        try:
            if restart:
                supervisor.stop(files)
            if was_running and not restart:
                _reload(cluster, pooler, files, config)
            else:
                supervisor.start(files, fds_needed=fds_needed(cluster), timeout=START_TIMEOUT)
                with admin_console(cluster, pooler) as conn:
                    _verify(conn, config)
        except (supervisor.SupervisorError, console.ConsoleError, _Mismatch) as exc:
            said = supervisor.log_problems(files, offset)
            _roll_back(cluster, pooler, files, was_running=was_running)
            message = _(
                "PgBouncer did not take the new configuration; the previous one stays in force. %(reason)s"
            ) % {"reason": str(exc)}
            if said and said[0] not in message:
                message += " " + _("PgBouncer said: %(line)s") % {"line": said[0]}
            log.warning("applying PgBouncer configuration of %s failed: %s", cluster.pk, message)
            raise ServiceError(message) from None
        pooler.mark_running()
