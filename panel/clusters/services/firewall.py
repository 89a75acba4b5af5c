"""Trusted sources: which addresses may connect to a cluster, its server and its pools alike.

One function per user action (add one, remove one, replace them all: the API's PUT), each the same
way through ``_apply``: validate (``lib.firewall``), save the rows under the cluster row's lock,
write pg_hba.conf and check that PostgreSQL can read it before the reload, re-apply PgBouncer's
files (its hba file follows the same rows), end the sessions of addresses no longer trusted, and
record an event. A failed step rolls the rows back and writes the previous files again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from panel.clusters import hooks
from panel.clusters.engine import dbconn, isolation
from panel.clusters.lib import firewall
from panel.clusters.models import Cluster, TrustedSource
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.services import transitions
from panel.clusters.standbys.engine import haproxy
from panel.clusters.standbys.lib import haproxy as haproxy_lib
from panel.clusters.standbys.services import ha, ha_files
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

FIELD = "source"


@on_node(timeout=60)
def add_trusted_source(cluster: Cluster, value: str) -> list[str]:
    """Trust one more address or network; the cluster's sources afterwards."""
    source = _parse(value)
    current = trusted_source_values(cluster)
    if source in current:
        raise ServiceError(
            N_("“%(source)s” is already a trusted source."),
            field=FIELD,
            code="firewall.source_exists",
            params={"source": source},
        )
    wanted = _normalize([*current, source])  # within MAX_SOURCES
    return _apply(cluster, wanted, Message(N_("Trusted source “%(source)s” added."), source=source))


@on_node(timeout=60)
def remove_trusted_source(cluster: Cluster, value: str) -> list[str]:
    """Stop trusting one address or network (its open sessions end); the sources afterwards."""
    # Any spelling finds the stored one; a value that is no address at all is "not a trusted source".
    with contextlib.suppress(ServiceError):
        value = _parse(value)
    current = trusted_source_values(cluster)
    if value not in current:
        raise ServiceError(
            N_("“%(source)s” is not a trusted source of this cluster."),
            code="firewall.source_not_found",
            params={"source": value},
        )
    wanted = [source for source in current if source != value]
    return _apply(cluster, wanted, Message(N_("Trusted source “%(source)s” removed."), source=value))


@on_node(timeout=60)
def set_trusted_sources(cluster: Cluster, values: list[str]) -> list[str]:
    """Replace every trusted source (an empty list: every address may connect again)."""
    wanted = _normalize(values)
    if not wanted:
        message = Message(N_("Trusted sources removed: every address may connect."))
    else:
        message = Message(N_("Trusted sources set to %(sources)s."), sources=", ".join(wanted))
    return _apply(cluster, wanted, message)


def _normalize(values: list[str]) -> list[str]:
    try:
        return firewall.normalize(values)
    except firewall.InvalidSource as exc:
        raise ServiceError.of(exc, FIELD) from None


def _parse(value: str) -> str:
    try:
        return firewall.display(firewall.parse_source(value))
    except firewall.InvalidSource as exc:
        raise ServiceError.of(exc, FIELD) from None


def _apply(cluster: Cluster, wanted: list[str], message: Message) -> list[str]:
    if not cluster.is_local:
        raise ServiceError(
            N_(
                "Trusted sources are for clusters this panel runs; an attached server keeps its own pg_hba.conf."
            ),
            code="firewall.unsupported",
            params={},
        )
    transitions.require_serving(cluster, fresh=True, field=FIELD)
    try:
        with transaction.atomic():
            cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
            if trusted_source_values(cluster) == wanted:
                return wanted
            _save(cluster, wanted)
            # With standbys, HAProxy is the one program that sees the clients' own addresses: it
            # applies the sources (its pattern file rewritten, checked with ``haproxy -c``, then a
            # graceful reload: sessions already open stay), PostgreSQL lets its address alone in.
            _write(
                lambda: _reload_proxy(cluster),
                (EngineError, OSError),
                N_("Could not apply the trusted sources to HAProxy: %(reason)s"),
            )
            # pg_hba.conf, read back by PostgreSQL before it is loaded.
            _write(
                lambda: isolation.refresh_server_auth(cluster),
                (EngineError, dbconn.DatabaseError, OSError),
                N_("Could not apply the trusted sources to PostgreSQL: %(reason)s"),
            )
            problem = hooks.pooler.reapply_config(cluster)
            if problem:
                # PgBouncer's own words about its hba file.
                raise ServiceError(problem, field=FIELD, code="firewall.pooler_refused")
    except ServiceError:
        _restore(cluster)
        raise
    ended = _end_untrusted_sessions(cluster, wanted)
    if ended:
        message = Message(
            "%(done)s %(ended)s",
            done=message,
            ended=Message(N_("%(count)d open session(s) from other addresses ended."), count=ended),
        )
    transitions.log_event(cluster, "trusted-sources", message)
    return wanted


def _save(cluster: Cluster, wanted: list[str]) -> None:
    cluster.trusted_sources.exclude(value__in=wanted).delete()
    kept = set(trusted_source_values(cluster))
    TrustedSource.objects.bulk_create(
        [TrustedSource(cluster=cluster, value=value) for value in wanted if value not in kept]
    )


def _write(step: Callable[[], object], errors: tuple[type[Exception], ...], failed: str) -> None:
    """One program's files written from the rows as they are now (``step``); its failure is the
    refusal ``failed``, a sentence with the program's ``%(reason)s``."""
    try:
        step()
    except errors as exc:
        raise ServiceError(
            failed, field=FIELD, code="firewall.apply_failed", params={"reason": exc}
        ) from None


def _reload_proxy(cluster: Cluster) -> None:
    if not cluster.is_ha:
        return
    user = isolation.os_user(cluster)
    ha.write_configs(cluster, user)
    ha.reload_haproxy(cluster, user, settings.PANEL_COMMAND_TIMEOUT)


def reconcile_proxy(cluster: Cluster) -> str | None:
    """The reconciler's part: a cluster with standbys whose HAProxy does not apply the rows' sources
    (made before HAProxy did: no ``src -f`` rule; or a pattern file that differs) or whose
    configuration an older panel wrote (before its retries on another member, say) gets its files
    written and HAProxy reloaded (checked first), then pg_hba.conf, which lets HAProxy's address
    in, in that order."""
    if not cluster.is_ha:
        return None
    directory = ha.ha_dir(cluster)
    wanted = firewall.render_haproxy_sources(trusted_source_values(cluster))
    try:
        current = (directory / haproxy_lib.HAPROXY_SOURCES).read_text()
        configured = ha.haproxy_config_path(cluster).read_text() == ha_files.haproxy_text(cluster)
    except FileNotFoundError:
        current, configured = "", False
    if configured and current == wanted:
        return None
    try:
        _reload_proxy(cluster)
        isolation.refresh_server_auth(cluster)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        return f"{cluster.name}: HAProxy's configuration: {exc}"
    return f"{cluster.name}: HAProxy's configuration and trusted sources brought up to date"


def _restore(cluster: Cluster) -> None:
    """After a failure, the rows are as before: write the files from them again (best effort)."""
    try:
        _reload_proxy(cluster)
        isolation.refresh_server_auth(cluster)
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        log.warning("restoring pg_hba.conf of %s: %s", cluster.pk, exc)
    hooks.pooler.reapply_config(cluster)


def _end_untrusted_sessions(cluster: Cluster, sources: list[str]) -> int:
    """A firewall cuts open connections too: terminate the server sessions of TCP clients the
    sources no longer allow. PgBouncer's server connections come over the Unix socket (no
    address) and are left alone. Behind HAProxy every server session comes from HAProxy's
    address: there the client's own connections to HAProxy from other addresses are cut."""
    if not sources:
        return 0
    if cluster.is_ha:
        ports = [port for port in (cluster.port, cluster.standby_port) if port]
        return haproxy.cut_clients(ports, lambda address: firewall.allows(sources, address))
    try:
        with dbconn.admin_connection(cluster) as conn:
            rows = conn.execute(
                "SELECT pid, host(client_addr) FROM pg_catalog.pg_stat_activity "
                "WHERE client_addr IS NOT NULL AND backend_type = 'client backend'"
            ).fetchall()
            pids = [pid for pid, address in rows if not firewall.allows(sources, address)]
            for pid in pids:
                conn.execute("SELECT pg_catalog.pg_terminate_backend(%s)", [pid])
    except dbconn.DatabaseError as exc:
        log.warning("ending untrusted sessions of %s: %s", cluster.pk, exc)
        return 0
    return len(pids)
