"""Applying a cluster's pools to its PgBouncer, one step after the other.

The one path every change takes (web, command line, reconciler), read top to bottom in
``apply_config``; each step is one module's, and no step calls back into the one that called it:

1. **validate and render** (``config`` → the pure ``lib``): both files for the pools in the
   database, refused before a byte is written if PgBouncer would misparse them;
2. **write** (``disk``): the cluster's certificate and both files, atomically, 0600, the files in
   force kept as ``.prev``;
3. **reload or restart** (``console`` RELOAD, or ``supervisor`` for a first start and for settings a
   RELOAD ignores);
4. **verify** (``console``): RELOAD answers success even when PgBouncer stopped reading a broken
   file, so nothing counts as applied until ``SHOW DATABASES`` matches what was meant;
5. **record**: the pooler row says running. A failed 3 or 4 puts the ``.prev`` files back in force
   and raises a ServiceError with PgBouncer's own log line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from panel.clusters.face import dbconn, isolation
from panel.clusters.models import Cluster
from panel.core.errors import N_, ServiceError
from panel.core.runas import EngineError
from panel.pools.engine import console, disk, supervisor
from panel.pools.engine.rendering import RenderedConfig, fds_needed, get_pooler, render_config
from panel.pools.lib.admin_console import diff_databases
from panel.pools.lib.pgbouncer_ini import needs_restart
from panel.pools.models import ConnectionPool, Pooler, PoolerStatus

log = logging.getLogger(__name__)

START_TIMEOUT = 10


def lock_cluster(cluster: Cluster) -> Cluster:
    """Re-read the cluster row under a lock held until the transaction ends."""
    return Cluster.objects.select_for_update().get(pk=cluster.pk)


def apply_config(cluster: Cluster) -> None:
    """Make PgBouncer serve exactly the cluster's pools, or leave the previous configuration in force.

    Returns once every pool is usable; stops PgBouncer when the cluster has no pool left.
    Raises ServiceError with PgBouncer's own log line when the new configuration did not load.
    """
    if not cluster.is_local or not cluster.pooler_port:
        raise ServiceError(
            N_("Connection pools are available for clusters provisioned by this panel."),
            code="pool.unsupported",
        )
    with transaction.atomic():
        cluster = lock_cluster(cluster)
        pooler = get_pooler(cluster)
        files = disk.bouncer_files(cluster)
        pools = list(cluster.pools.order_by("name"))
        if not pools:
            _stop_serving(files, pooler)
            return
        config = _validate_and_render(cluster, pools, pooler, files)
        written = _write(cluster, files, config)
        try:
            _load_and_verify(cluster, pooler, files, config, written)
        except (supervisor.SupervisorError, console.ConsoleError, _Mismatch) as exc:
            said = disk.log_problems(files, written.log_offset)
            _roll_back(cluster, pooler, files, was_running=written.was_running)
            raise _failure(cluster, exc, said) from None
        pooler.mark_running()


# --- the steps, in order -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Written:
    """What the write step found and did: whether PgBouncer ran, and how it must take the files."""

    was_running: bool
    restart: bool
    # Where PgBouncer's log ended before the change: its complaints about the change come after.
    log_offset: int


class _Mismatch(Exception):
    """PgBouncer answered, but does not serve what was meant."""


def _stop_serving(files: disk.BouncerFiles, pooler: Pooler) -> None:
    # Nothing to serve: no process to supervise. The pooler port stays reserved for the cluster
    # in the database, so the next pool can take it again.
    supervisor.stop(files)
    if pooler.status != PoolerStatus.STOPPED:
        pooler.mark_stopped()


def _validate_and_render(
    cluster: Cluster, pools: list[ConnectionPool], pooler: Pooler, files: disk.BouncerFiles
) -> RenderedConfig:
    try:
        supervisor.check_socket_path(files)
    except supervisor.SupervisorError as exc:
        raise ServiceError.because(
            N_("PgBouncer cannot be started here: %(reason)s"), "pool.pooler_unavailable", exc
        ) from None
    config = render_config(cluster, pools, pooler, files)
    # PgBouncer logs in by peer authentication: the server must know every pool's role first.
    try:
        isolation.refresh_server_auth(cluster)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        raise ServiceError.because(
            N_("Could not update how the server authenticates PgBouncer: %(reason)s"),
            "pool.server_auth_failed",
            exc,
        ) from None
    return config


def _write(cluster: Cluster, files: disk.BouncerFiles, config: RenderedConfig) -> _Written:
    was_running = supervisor.running_pid(files) is not None
    try:
        disk.prepare_directory(files)
        # Clients see the cluster's own certificate, so the cluster's CA verifies both.
        disk.copy_private(files, cluster.pgdata / "server.crt", files.tls_cert)
        disk.copy_private(files, cluster.pgdata / "server.key", files.tls_key)
        restart = was_running and needs_restart(disk.read_text(files.ini), config.ini)
        offset = disk.log_size(files)
        disk.install(files, config.ini, config.auth, config.hba)
    except OSError as exc:
        raise ServiceError.because(
            N_("Could not write PgBouncer's files: %(reason)s"), "pool.write_failed", exc.strerror or exc
        ) from None
    except EngineError as exc:
        raise ServiceError.because(
            N_("Could not write PgBouncer's files: %(reason)s"), "pool.write_failed", exc
        ) from None
    return _Written(was_running=was_running, restart=restart, log_offset=offset)


def _load_and_verify(
    cluster: Cluster, pooler: Pooler, files: disk.BouncerFiles, config: RenderedConfig, written: _Written
) -> None:
    if written.was_running and not written.restart:
        _reload(cluster, pooler, files, config)
        return
    if written.restart:
        supervisor.stop(files)
    supervisor.start(
        files, fds_needed=fds_needed(cluster), timeout=START_TIMEOUT, join=isolation.server_cgroup(cluster)
    )
    with console.admin_console(cluster, pooler) as conn:
        _verify(conn, config)


def _reload(cluster: Cluster, pooler: Pooler, files: disk.BouncerFiles, config: RenderedConfig) -> None:
    """RELOAD the installed files, then verify."""
    with console.admin_console(cluster, pooler) as conn:
        loaded = {row.name: row for row in console.show_databases(conn)}
        # PgBouncer 1.18 cannot change a pool's forced user on RELOAD: losing it is refused ("losing
        # forced user not supported") and gaining one crashes it at the next login ("put_in_order:
        # found existing elem"). Such a pool is removed by one RELOAD and added back by the next,
        # which reconnects its clients only.
        regained = {
            s.name for s in config.specs if s.name in loaded and (loaded[s.name].force_user or None) != s.user
        }
        if regained:
            disk.write_file(files, files.ini, config.ini_without(regained))
            console.reload(conn)
            disk.write_file(files, files.ini, config.ini)
        console.reload(conn)
        # RELOAD is done when it answers, so the same console connection sees its result.
        _verify(conn, config)


def _verify(conn: console.Connection, config: RenderedConfig) -> None:
    problems = diff_databases(config.specs, console.show_databases(conn), target=config.target)
    if problems:
        raise _Mismatch(" ".join(problems))


# --- when a step fails ---------------------------------------------------------------------------


def _roll_back(cluster: Cluster, pooler: Pooler, files: disk.BouncerFiles, *, was_running: bool) -> None:
    """Put the previous files back in force; best effort, the caller reports the first failure."""
    restored = disk.restore_previous(files)
    try:
        if was_running and supervisor.running_pid(files) is not None:
            with console.admin_console(cluster, pooler) as conn:
                console.reload(conn)
        else:
            supervisor.stop(files)
            if was_running and restored:
                supervisor.start(
                    files,
                    fds_needed=fds_needed(cluster),
                    timeout=START_TIMEOUT,
                    join=isolation.server_cgroup(cluster),
                )
    except (supervisor.SupervisorError, console.ConsoleError) as exc:
        log.warning("rolling back PgBouncer of %s: %s", cluster.pk, exc)


def _failure(cluster: Cluster, exc: Exception, said: list[str]) -> ServiceError:
    """What the user reads: which kind of failure and what to do. PgBouncer's own lines (they
    name the configuration's path and line) and the supervisor's words go to the log only."""
    reason = str(exc)
    log.warning(
        "applying PgBouncer configuration of %s failed: %s%s",
        cluster.pk,
        reason,
        f" PgBouncer said: {' / '.join(said)}" if said else "",
    )
    if "Address already in use" in reason or any("Address already in use" in line for line in said):
        return ServiceError(
            N_(
                "PgBouncer could not listen on its port %(port)s: another program holds it. The "
                "previous configuration stays in force; an administrator frees the port."
            ),
            code="pool.port_taken",
            params={"port": cluster.pooler_port},
        )
    return ServiceError(
        N_(
            "PgBouncer did not take the new configuration; the previous one stays in force. The "
            "panel's log holds the details for an administrator."
        ),
        code="pool.apply_failed",
        params={},
    )
