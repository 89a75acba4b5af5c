"""Attaching an existing PostgreSQL server: the panel records it and manages its users and
databases, but never runs it.

Attaching makes the panel open a connection wherever the form says, from inside the machine that
runs every cluster. For staff (and the operator at the command line) that is a tool; for any other
account it would be a network probe. So, unless the account is staff:

- attaching is refused unless PANEL_ATTACH_FOR_ALL opens it to every account;
- the host is resolved once, here, and every address is checked: loopback, link-local,
  unspecified, multicast and reserved addresses are refused, and so are this machine's own
  addresses on a port of PANEL_PORT_RANGE (the panel's clusters and poolers); libpq then connects
  to the checked address (``hostaddr``), so a second DNS answer cannot send it elsewhere;
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

import ipaddress
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from panel.clusters.engine import dbconn
from panel.clusters.lib.hosts import InvalidHost, IPAddress, forbidden_reason, validate_host
from panel.clusters.lib.names import InvalidName, validate_cluster_name
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus, Database, DatabaseUser
from panel.core.errors import N_, Message, ServiceError

log = logging.getLogger(__name__)

# The authentication methods that make a client send a password (libpq's require_auth).
PASSWORD_METHODS = "password,md5,scram-sha-256"
# libpq must not fall back on files of the user running the panel (root's ~/.pgpass, client
# certificates) when an account that is not staff names the server.
NO_FILE = "/nonexistent/pgpanel-attach"


def uniform_failure() -> str:
    return _(
        "Could not attach this server. The panel attaches a PostgreSQL server that it can reach, "
        "that asks this user for a password, and that accepts this password, database and SSL "
        "mode. Check them and try again; staff can attach servers the panel cannot reach this way."
    )


def may_attach(user: AbstractBaseUser) -> bool:
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


def attach_cluster(
    owner: AbstractBaseUser, *, name: str, server: ExternalServer, operator: bool = False
) -> Cluster:
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
        raise ServiceError(
            N_("You already have a cluster named “%(name)s”."),
            field="name",
            code="cluster.name_taken",
            params={"name": name},
        )
    if privileged:
        version_num, databases = _probe(host=host, server=server)
    else:
        _count_attempt(owner)
        started = time.monotonic()
        try:
            version_num, databases = _probe_restricted(host=host, server=server)
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
        cluster.log_event("attached", Message(N_("Attached %(host)s:%(port)s."), host=host, port=server.port))
    return cluster


class _Refused(Exception):
    """Why an attempt of an account that is not staff failed: for the log only."""


def _count_attempt(owner: AbstractBaseUser) -> None:
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


def _local_addresses() -> set[IPAddress]:
    found: set[IPAddress] = set()
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    found.add(ipaddress.ip_address(entry.address.split("%", 1)[0]))
                except ValueError:
                    continue
    return found


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an address resolves to itself), in the resolver's order."""
    try:
        return [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in seen:
            seen.append(address)
    return seen


def _probe(*, host: str, server: ExternalServer, **extra: Any) -> tuple[int, list[tuple[str, str]]]:
    """Connect as the form says; PostgreSQL's own words when that fails (staff, operator)."""
    try:
        with _connect(host, server, **extra) as conn:
            return conn.info.server_version, dbconn.list_databases(conn)
    except dbconn.DatabaseError as exc:
        raise ServiceError(
            N_("Could not connect: %(reason)s"), code="attach.connect_failed", params={"reason": exc}
        ) from None


def _probe_restricted(*, host: str, server: ExternalServer) -> tuple[int, list[tuple[str, str]]]:
    try:
        addresses = resolve(host, server.port)
    except (OSError, UnicodeError) as exc:
        raise _Refused(f"could not resolve: {exc}") from None
    if not addresses:
        raise _Refused("no address")
    local = _local_addresses()
    ports = tuple(settings.PANEL_PORT_RANGE)
    for address in addresses:
        reason = forbidden_reason(address, server.port, local_addresses=local, panel_ports=ports)  # type: ignore[arg-type]
        if reason:
            raise _Refused(f"{address}: {reason}")
    extra = {
        "hostaddr": str(addresses[0]),
        "require_auth": PASSWORD_METHODS,
        "passfile": NO_FILE,
        "sslcert": NO_FILE,
        "sslkey": NO_FILE,
    }
    try:
        with _connect(host, server, **extra) as conn:
            if not password_was_used(conn):
                raise _Refused("the server let the user in without a password")
            return conn.info.server_version, dbconn.list_databases(conn)
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
        **extra,
    ) as conn:
        yield conn


def password_was_used(conn: Any) -> bool:
    """Whether the server made this connection authenticate with a password (libpq's
    PQconnectionUsedPassword): False for trust, peer, ident or certificate logins."""
    return bool(conn.pgconn.used_password)
