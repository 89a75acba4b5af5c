"""Attaching an existing PostgreSQL server: the panel records it and manages its users and
databases, but never runs it.

Attaching makes the panel open a connection wherever the form says, from inside the machine that
runs every cluster. For staff (and the operator at the command line) that is a tool; for any other
account it would be a network probe. So, unless the account is staff:

- attaching is refused unless PANEL_ATTACH_FOR_ALL opens it to every account;
- the host is resolved once, here, and every address is checked by the rule log sinks and
  migration sources follow (``destinations``): loopback, link-local, unspecified, multicast and
  reserved addresses, every address of this machine and of every registered node are refused on
  every port, unless the operator lists the network in PANEL_ATTACH_NETWORKS (the panel's own
  cluster ports stay refused even then); libpq then connects to the checked address
  (``hostaddr``), so a second DNS answer cannot send it elsewhere;
- every failure after the form's own checks gives one text (``UNIFORM_FAILURE``) and takes at
  least PANEL_ATTACH_FAILURE_SECONDS, so that closed, filtered and open ports, a refused address,
  a wrong password and a timeout all look alike; the real reason goes to the panel's log;
- attempts are limited per account (PANEL_ATTACH_RATE per PANEL_ATTACH_RATE_SECONDS);
- the server must ask for a password: ``require_auth`` makes libpq give up before a server that
  trusts the user (or authenticates it some other way) completes the login, and
  ``PQconnectionUsedPassword`` confirms it on the connection that succeeded. A passwordless
  server is one anybody can reach through the panel once attached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from panel.clusters.engine import dbconn
from panel.clusters.lib.hosts import InvalidHost, validate_host
from panel.clusters.lib.libpq import outside_client_params
from panel.clusters.lib.names import InvalidName, name_taken, validate_cluster_name
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Database, DatabaseUser
from panel.clusters.services import destinations, failures, transitions
from panel.core.errors import N_, Message, ServiceError

log = logging.getLogger(__name__)

# The authentication methods that make a client send a password (libpq's require_auth).
PASSWORD_METHODS = "password,md5,scram-sha-256"


def uniform_failure() -> str:
    return _(
        "Could not attach this server. The panel attaches a PostgreSQL server that it can reach, "
        "that asks this user for a password, and that accepts this password, database and SSL "
        "mode. Check them and try again; staff can attach servers the panel cannot reach this way."
    )


def may_attach(user: User) -> bool:
    """Whether ``user`` may use the attach form at all."""
    return bool(getattr(user, "is_staff", False)) or settings.PANEL_ATTACH_FOR_ALL


@dataclass(frozen=True)
class ExternalServer:
    """What a user types to attach an existing server."""

    host: str
    port: int
    user: str
    password: str
    database: str
    sslmode: str


def attach_cluster(owner: User, *, name: str, server: ExternalServer, operator: bool = False) -> Cluster:
    """Test the connection, then record an existing server the panel will not run itself.

    ``operator`` is True for the panel's operator at the command line, who may attach anything;
    otherwise the owner's account decides: staff may too, other accounts under the rules in the
    module's docstring."""
    privileged = operator or bool(getattr(owner, "is_staff", False))
    if not privileged and not settings.PANEL_ATTACH_FOR_ALL:
        raise ServiceError(
            N_("Attaching existing servers is reserved to staff on this panel. Ask an administrator."),
            code="attach.staff_only",
            params={},
        )
    try:
        validate_cluster_name(name)
    except InvalidName as exc:
        raise ServiceError.of(exc, "name") from None
    try:
        host = validate_host(server.host)
    except InvalidHost as exc:
        raise ServiceError.of(exc, "host") from None
    if not 1 <= server.port <= 65535:
        raise ServiceError(
            N_("A port is a number from 1 to 65535."), field="port", code="attach.port_invalid", params={}
        )
    if Cluster.objects.filter(owner=owner, name=name).exists():
        raise name_taken(name)
    address = ""
    if privileged:
        version_num, databases = _probe(host=host, server=server)
    else:
        _count_attempt(owner)
        started = time.monotonic()
        try:
            version_num, databases, address = _probe_restricted(host=host, server=server)
        except _Refused as exc:
            log.info("attach by %s to %s:%s refused: %s", owner.pk, host, server.port, exc)
            time.sleep(max(0.0, settings.PANEL_ATTACH_FAILURE_SECONDS - (time.monotonic() - started)))
            raise ServiceError(uniform_failure(), code="attach.failed") from None
    with transaction.atomic():
        cluster = Cluster.objects.create(
            owner=owner,
            name=name,
            kind=ClusterKind.EXTERNAL,
            version=str(version_num // 10000),
            status=ClusterStatus.ONLINE,
            progress=100,
            host=host,
            host_address=address,
            port=server.port,
            sslmode=server.sslmode,
            admin_user=server.user,
            default_database=server.database,
            online_since=timezone.now(),
        )
        admin = DatabaseUser(cluster=cluster, name=server.user, is_protected=True)
        admin.password = server.password
        admin.save()
        for db_name, db_owner in databases:
            Database.objects.create(
                cluster=cluster, name=db_name, owner_name=db_owner, is_protected=db_name == server.database
            )
        transitions.log_event(
            cluster, "attached", Message(N_("Attached %(host)s:%(port)s."), host=host, port=server.port)
        )
    return cluster


class _Refused(Exception):
    """Why an attempt of an account that is not staff failed: for the log only."""


def _count_attempt(owner: User) -> None:
    """Count one attempt of ``owner``; refuse it when the account used up its window."""
    key = f"attach-attempts:{owner.pk}"
    window = settings.PANEL_ATTACH_RATE_SECONDS
    now = time.time()
    recent = [t for t in cache.get(key, []) if now - t < window]
    if len(recent) >= settings.PANEL_ATTACH_RATE:
        wait = int(window - (now - min(recent))) // 60 + 1
        raise ServiceError(
            ngettext(
                "Too many attach attempts from this account. Try again in %(minutes)d minute.",
                "Too many attach attempts from this account. Try again in %(minutes)d minutes.",
                wait,
            )
            % {"minutes": wait},
            code="attach.rate_limited",
        )
    recent.append(now)
    cache.set(key, recent, window)


def _probe(*, host: str, server: ExternalServer, **extra: Any) -> tuple[int, list[tuple[str, str]]]:
    """Connect as the form says; when that fails, why in the panel's words (staff, operator):
    libpq's and the server's are English and name the panel's certificate files, so they go to
    the log."""
    try:
        with _connect(host, server, **extra) as conn:
            return conn.info.server_version, dbconn.list_databases(conn)
    except dbconn.DatabaseError as exc:
        log.warning("attaching %s:%s as %r failed: %s", host, server.port, server.user, exc)
        reason = failures.connecting(exc, user=server.user, database=server.database, sslmode=server.sslmode)
        raise ServiceError(
            N_("Could not connect to %(host)s:%(port)s: %(reason)s."),
            code="attach.connect_failed",
            params={"host": host, "port": server.port, "reason": reason},
        ) from None


def _probe_restricted(*, host: str, server: ExternalServer) -> tuple[int, list[tuple[str, str]], str]:
    """Check every address the host has, connect to the first; its version, databases and the
    address (kept: later connections go there, libpq's ``hostaddr``)."""
    allowed = destinations.networks(settings.PANEL_ATTACH_NETWORKS)
    try:
        address = destinations.checked_address(host, server.port, allowed=allowed)
    except destinations.Unresolved:
        raise _Refused("no address") from None
    except destinations.Refused as exc:
        raise _Refused(str(exc)) from None
    extra = {"hostaddr": address, "require_auth": PASSWORD_METHODS}
    try:
        with _connect(host, server, **extra) as conn:
            if not password_was_used(conn):
                raise _Refused("the server let the user in without a password")
            return conn.info.server_version, dbconn.list_databases(conn), address
    except dbconn.DatabaseError as exc:
        raise _Refused(str(exc)) from None


@contextmanager
def _connect(host: str, server: ExternalServer, **extra: Any) -> Iterator[Any]:
    # Behind a PgBouncer the search_path pin is refused; these are the user's own credentials,
    # so nothing is gained by pinning them there.
    with dbconn.connect(
        unpinned_behind_pooler=True,
        host=host,
        port=server.port,
        user=server.user,
        password=server.password,
        dbname=server.database,
        sslmode=server.sslmode,
        **{**outside_client_params(server.sslmode), **extra},
    ) as conn:
        yield conn


def password_was_used(conn: Any) -> bool:
    """Whether the server made this connection authenticate with a password (libpq's
    PQconnectionUsedPassword): False for trust, peer, ident or certificate logins."""
    return bool(conn.pgconn.used_password)
