"""Rendering of the panel-managed parts of postgresql.conf and pg_hba.conf (pure, no Django)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from panel.clusters.lib import firewall

GUARD_LIBRARY_NAME = "pgpanel_guard"
# Loaded beside the guard for the Queries tab (panel/insights). track = top: a function's inner
# statements would count twice; no utility statements (the panel's own role changes among them).
STATEMENTS_LIBRARY = "pg_stat_statements"
STATEMENTS_SETTINGS = (
    "pg_stat_statements.max = 1000",
    "pg_stat_statements.track = top",
    "pg_stat_statements.track_utility = off",
    "pg_stat_statements.save = on",
)


def _conf_string(value: str) -> str:
    """A single-quoted postgresql.conf string (the parser reads backslash escapes in it)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _quoted_list(items: Sequence[str]) -> str:
    """A list setting whose items are each double-quoted, so case and commas survive."""
    for item in items:
        if '"' in item or "\n" in item:
            raise ValueError(f"cannot be written in a list setting: {item!r}")
    return _conf_string(", ".join(f'"{item}"' for item in items))


def guard_lines(preload_libraries: Sequence[str], reserved_roles: Sequence[str]) -> list[str]:
    """The settings that load the privilege guard and tell it which roles to protect."""
    return [
        f"shared_preload_libraries = {_quoted_list(preload_libraries)}",
        f"{GUARD_LIBRARY_NAME}.reserved_roles = {_quoted_list(reserved_roles)}",
    ]


QUOTA_FILE = "quota.conf"


def _identifier_list(names: Sequence[str]) -> str:
    """Names as one list setting of double-quoted identifiers (a ``"`` in a name doubled, as
    PostgreSQL's SplitIdentifierString reads it), in a config-file string: any name a tenant can
    give a database or a role, quotes, backslashes and line breaks included, stays one item."""
    items = ",".join('"' + name.replace('"', '""') + '"' for name in names)
    return _conf_string(items).replace("\n", "\\n").replace("\r", "\\r")


def render_quota_conf(readonly_databases: Sequence[str], readonly_owners: Sequence[str]) -> str:
    """The guard's write stops: databases, and roles whose relations, over their storage quota."""
    return (
        "# Written by the control panel (storage quotas); edits here are overwritten.\n"
        f"{GUARD_LIBRARY_NAME}.readonly_databases = {_identifier_list(sorted(readonly_databases))}\n"
        f"{GUARD_LIBRARY_NAME}.readonly_owners = {_identifier_list(sorted(readonly_owners))}\n"
    )


def loads_guard(conf_text: str, preload_libraries: Sequence[str], reserved_roles: Sequence[str]) -> bool:
    """Whether a rendered configuration carries exactly these guard settings (with the statistics
    library beside the guard, or without it as rendered before it was added)."""
    lines = {line.strip() for line in conf_text.splitlines()}
    return any(
        all(line in lines for line in guard_lines(libraries, reserved_roles))
        for libraries in ((*preload_libraries, STATEMENTS_LIBRARY), tuple(preload_libraries))
    )


JSON_LOG_LINE = "log_destination = 'stderr,jsonlog'"


def writes_json_log(conf_text: str) -> bool:
    """Whether a rendered panel.conf has PostgreSQL write its ``jsonlog`` (clusters made before
    issue 29 did not: the reconciler rewrites their file and reloads)."""
    return JSON_LOG_LINE in {line.strip() for line in conf_text.splitlines()}


@dataclass(frozen=True)
class ServerSettings:
    """What the panel decides about one server; rendered into ``postgresql.auto-panel.conf``."""

    port: int
    listen_addresses: str
    socket_dir: str
    max_connections: int
    superuser_reserved_connections: int
    shared_buffers_bytes: int
    log_dir: str
    # Absolute paths of the libraries to preload (the privilege guard) and the roles it reserves.
    preload_libraries: tuple[str, ...] = ()
    reserved_roles: tuple[str, ...] = ()
    # Files read last (``include_if_exists``), whose settings win: the owner's configuration.
    includes: tuple[str, ...] = ()
    # The most WAL a replica's slot may hold back on this server (MB; -1: PostgreSQL's default,
    # no limit): a stopped replica must not fill its source's disk.
    max_slot_wal_keep_mb: int = -1

    def render(self) -> str:
        shared_buffers_kb = self.shared_buffers_bytes // 1024
        lines = [
            "# Written by the control panel; edits here are overwritten.",
            f"port = {self.port}",
            f"listen_addresses = '{self.listen_addresses}'",
            f"unix_socket_directories = '{self.socket_dir}'",
            "unix_socket_permissions = 0700",
            f"max_connections = {self.max_connections}",
            f"superuser_reserved_connections = {self.superuser_reserved_connections}",
            f"shared_buffers = {shared_buffers_kb}kB",
            "password_encryption = 'scram-sha-256'",
            "ssl = on",
            "ssl_cert_file = 'server.crt'",
            "ssl_key_file = 'server.key'",
            "ssl_ca_file = 'ca.crt'",
            "ssl_min_protocol_version = 'TLSv1.2'",
            "logging_collector = on",
            # The Logs tab reads the JSON records (panel/logs/lib/jsonlog.py): who wrote an entry
            # is a field there, not a text prefix a name with a line break could forge.
            JSON_LOG_LINE,
            f"log_directory = '{self.log_dir}'",
            "log_filename = 'postgresql.log'",
            "log_file_mode = 0600",
            "log_rotation_size = 10MB",
            "log_line_prefix = '%m [%p] %q%u@%d '",
            "log_timezone = 'UTC'",
            "timezone = 'UTC'",
            "dynamic_shared_memory_type = posix",
        ]
        if self.max_slot_wal_keep_mb >= 0:
            lines.append(f"max_slot_wal_keep_size = {self.max_slot_wal_keep_mb}MB")
        if self.preload_libraries:
            lines += guard_lines((*self.preload_libraries, STATEMENTS_LIBRARY), self.reserved_roles)
            lines += STATEMENTS_SETTINGS
            # The storage quotas' write stops (panel/quotas), in a file of their own so that a
            # quota's change rewrites and reloads that file alone.
            lines.append(f"include_if_exists = '{QUOTA_FILE}'")
        lines += [f"include_if_exists = {_conf_string(name)}" for name in self.includes]
        return "\n".join(lines) + "\n"


# The pg_ident.conf map PgBouncer's server logins go through (see render_hba).
POOLER_MAP = "pgbouncer"
# The map pgBackRest's login goes through: the cluster's OS user as the backup role, nothing else.
BACKUP_MAP = "pgbackrest"
# The map Patroni's local login goes through (a cluster with standbys): the superuser, from the
# cluster's OS user (Patroni) and the panel's own.
SUPERUSER_MAP = "superuser"
_IDENT_TOKEN_RE = re.compile(r"[A-Za-z0-9_$.-]+")


def render_hba(
    superuser: str,
    monitor_role: str,
    trusted_sources: Sequence[str] = (),
    replication_role: str = "",
    *,
    members_from: Sequence[str] | None = None,
    clients_from: Sequence[str] = (),
    replicas_from: Sequence[str] = (),
    panel_roles: Sequence[str] = (),
    backup_role: str = "",
    member_role: str = "",
) -> str:
    """Clients must use TLS and SCRAM over TCP; the panel's own roles come over the socket with a
    password. Any other role over the socket is PgBouncer logging in: ``peer`` authentication
    through the ``pgbouncer`` map, which lets only the cluster's own OS user in, as the roles the
    map lists, so PgBouncer holds no role's password (the socket directory is 0700 too).

    ``trusted_sources`` (stored values, ``lib.firewall``) are the only addresses a TCP client may
    come from; none means any address, as on the managed service (the file is then the one every
    cluster had before trusted sources). An address not listed matches no line, so PostgreSQL
    answers "no pg_hba.conf entry for host"; a listed one without TLS gets the same refusal as
    before (the ``host … reject`` line). The socket lines come first and do not depend on them:
    the panel and PgBouncer's server logins never use TCP.

    ``replication_role`` (the panel's, reserved by the guard) may stream WAL to the cluster's
    read-only replicas: from loopback (replicas on the cluster's node) and from ``replicas_from``
    (the addresses of the other nodes its replicas run on), over TLS, with its password, and
    nothing else (no database, no other address).

    ``members_from`` (a cluster with standbys: the addresses of the nodes holding its members):
    the superuser may come from loopback and from there over TCP with its password, for
    replication and pg_rewind between members only (``firewall.member_hba_lines``). Clients then
    come through HAProxy, which is what applies the trusted sources (PostgreSQL sees HAProxy's
    address, never the client's): TCP clients are let in from ``clients_from`` alone (loopback and
    the cluster's node: ``firewall.proxy_networks``), whatever the sources, so no other address
    reaches a member's own port. HAProxy comes from an address of its own
    (``firewall.HAPROXY_SOURCE``), from which no panel role is let in: a line before all others.

    ``panel_roles``: the panel's other login roles (the migration's subscription owner). After the
    lines above, no panel role comes in over TCP at all: a wrong password for one through the
    cluster's port is refused by this file, never asked for.

    ``backup_role`` (pgBackRest's) logs in over the socket to the maintenance database alone, by
    peer authentication through the ``BACKUP_MAP`` of pg_ident.conf (the cluster's OS user): no
    file holds a password for it.

    With standbys, Patroni logs in as the superuser over the socket by peer authentication too
    (``SUPERUSER_MAP``: the cluster's OS user and the panel's), so that no file of the cluster
    holds the superuser's password; the members stream and rewind as ``member_role``."""
    addresses = [network.with_prefixlen for network in firewall.networks(trusted_sources)]
    if members_from is not None:
        addresses = list(clients_from) or [firewall.LOOPBACK]
    elif not trusted_sources:
        addresses = ["all"]
    lines = [
        "# Written by the control panel; edits here are overwritten.",
        "# TYPE  DATABASE  USER  ADDRESS  METHOD",
    ]
    if members_from is not None:
        lines.append(f"local   all       {superuser}  peer map={SUPERUSER_MAP}")
    lines += [
        f"local   all       {superuser}  scram-sha-256",
        f"local   all       {monitor_role}  scram-sha-256",
    ]
    if backup_role:
        lines += [
            f"local   postgres  {backup_role}  peer map={BACKUP_MAP}",
            f"local   all       {backup_role}  reject",
        ]
    lines += [
        f"local   all       all           peer map={POOLER_MAP}",
    ]
    every_panel_role = [
        superuser,
        monitor_role,
        *([replication_role] if replication_role else []),
        *([backup_role] if backup_role else []),
        *([member_role] if member_role else []),
        *panel_roles,
    ]
    if members_from is not None:
        lines.append(firewall.panel_roles_refused(every_panel_role, f"{firewall.HAPROXY_SOURCE}/32"))
        lines += firewall.member_hba_lines(
            ",".join([superuser, *([member_role] if member_role else [])]), members_from
        )
    lines += [
        f"host    all       {superuser}  all  reject",
    ]
    if replication_role:
        lines += [
            f"hostssl replication  {replication_role}  {address}  scram-sha-256"
            for address in dict.fromkeys(["127.0.0.1/32", "::1/128", *map(hba_address, replicas_from)])
        ]
        lines.append(f"host    all       {replication_role}  all  reject")
    lines.append(firewall.panel_roles_refused(every_panel_role, "all"))
    lines += [f"hostssl all       all           {address}  scram-sha-256" for address in addresses]
    lines += [f"host    all       all           {address}  reject" for address in addresses]
    return "\n".join(lines) + "\n"


def hba_address(address: str) -> str:
    """A node's address as pg_hba.conf's ADDRESS field (``firewall.host_network``: one host, or a
    host name PostgreSQL matches by its reverse and forward lookups); ``ValueError`` otherwise."""
    return firewall.host_network(address)


def ident_token_ok(value: str) -> bool:
    """Whether ``value`` can be written to pg_ident.conf."""
    return _IDENT_TOKEN_RE.fullmatch(value) is not None


def _ident_token(value: str, what: str) -> str:
    if not ident_token_ok(value):
        raise ValueError(f"{what} {value!r} cannot be written to pg_ident.conf.")
    # Quoted, so that no role name can be read as a keyword or a regular expression.
    return f'"{value}"'


def render_ident(
    os_user: str,
    roles: list[str],
    backup_role: str = "",
    superuser: str = "",
    superuser_from: Sequence[str] = (),
) -> str:
    """pg_ident.conf: the cluster's OS user may log in as each of ``roles`` (PostgreSQL 15 has no
    ``all`` keyword here, so one line per role; rewritten whenever the roles change) through
    PgBouncer's map, and as ``backup_role`` through pgBackRest's; ``superuser_from`` (OS users)
    as ``superuser`` through ``SUPERUSER_MAP``."""
    lines = [
        "# Written by the control panel; edits here are overwritten.",
        "# MAPNAME  SYSTEM-USERNAME  PG-USERNAME",
    ]
    system_user = _ident_token(os_user, "The OS user")
    lines += [f"{POOLER_MAP}  {system_user}  {_ident_token(role, 'The role')}" for role in sorted(set(roles))]
    if backup_role:
        lines.append(f"{BACKUP_MAP}  {system_user}  {_ident_token(backup_role, 'The role')}")
    for name in dict.fromkeys(superuser_from):
        lines.append(
            f"{SUPERUSER_MAP}  {_ident_token(name, 'The OS user')}  {_ident_token(superuser, 'The role')}"
        )
    return "\n".join(lines) + "\n"


# A read-only replica's own settings, in PGDATA beside panel.conf (which includes it).
STANDBY_FILE = "standby.conf"
STANDBY_RETRY_INTERVAL = "500ms"


def _conninfo_value(value: str) -> str:
    """A libpq conninfo value, single-quoted with its quotes and backslashes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def standby_conninfo(params: dict[str, str | int]) -> str:
    """libpq's ``key='value' …`` form of ``params`` (no password: it lives in a passfile)."""
    if "password" in params:
        raise ValueError("a replica's conninfo names a passfile, never a password")
    return " ".join(f"{key}={_conninfo_value(str(value))}" for key, value in params.items())


def render_standby_conf(conninfo: str, slot: str) -> str:
    """What makes a server a streaming replica of another (with ``standby.signal`` in PGDATA)."""
    if not re.fullmatch(r"[a-z0-9_]{1,63}", slot):
        raise ValueError(f"not a replication slot name: {slot!r}")
    return (
        "# Written by the control panel: a read-only replica; edits here are overwritten.\n"
        f"primary_conninfo = {_conf_string(conninfo)}\n"
        f"primary_slot_name = '{slot}'\n"
        "hot_standby = on\n"
        # As the members have it: after its source's failover the replica retries its source
        # every half second, not PostgreSQL's default 5 s.
        f"wal_retrieve_retry_interval = '{STANDBY_RETRY_INTERVAL}'\n"
    )


# A session's temporary files (sorts, hashes spilled to disk) are bounded by the plan's disk:
# a tenth of it each. PostgreSQL's temp_file_limit is a superuser's setting (no tenant's SET or
# ALTER ROLE/DATABASE … SET changes it); the owner's own value on the Settings tab may only be lower.
TEMP_FILE_DISK_FRACTION = 10


def temp_file_limit_kb(disk_bytes: int, owner_kb: int) -> int:
    """The ``temp_file_limit`` in force: the plan's bound, or the owner's when lower (-1: none)."""
    plan_kb = max(1024, disk_bytes // TEMP_FILE_DISK_FRACTION // 1024)
    return plan_kb if owner_kb < 0 else min(owner_kb, plan_kb)


def render_temp_file_limit(limit_kb: int) -> str:
    """The line that ends the owner's settings file, so that it wins over the owner's own."""
    return f"# The plan's disk bounds temporary files (the owner's value only if lower).\ntemp_file_limit = {limit_kb}kB\n"
