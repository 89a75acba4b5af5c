"""What a valid ``pgbouncer.ini`` holds: the pool, server and global specs, and the rules (pure, no Django).

PgBouncer 1.18 answers RELOAD with success even when the file is broken and then loads it only up
to the bad line, so everything is validated here, before a byte is written. The rules follow
PgBouncer's own parsers (libusual ``parse_ini_file`` and ``loader.c``), checked against the captures
in ``tests/fixtures``:

- a ``[databases]`` key may hold only ``[A-Za-z0-9_.-]`` (quoting with ``"`` does not work in 1.18),
  at most 63 bytes, and is case-sensitive;
- an ini value is the rest of the line, trailing blanks removed; ``;`` and ``#`` start a comment only
  at the start of a line, so an inline "comment" becomes part of the value;
- connection-string values are separated by spaces and may be single-quoted, ``''`` meaning ``'``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from panel.core.errors import N_, CodedError, Term

POOL_MODES = ("session", "transaction", "statement")
POOL_NAME_MIN = 3
POOL_NAME_MAX = 60
ADMIN_DATABASE = "pgbouncer"
# PostgreSQL's NAMEDATALEN - 1: longer database and role names do not exist on the server.
MAX_IDENTIFIER_BYTES = 63
AUTH_TYPES = ("scram-sha-256", "md5", "hba")
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

_POOL_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_SAFE_CSTR_VALUE_RE = re.compile(r"[A-Za-z0-9_./$:@+-]+")
_HOST_NAME_RE = re.compile(r"[A-Za-z0-9_.:-]+")
_LISTEN_ADDR_RE = re.compile(r"\*|[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*")
_STARTUP_PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CHAR_NAMES = {
    " ": "space",
    "\t": "tab",
    "\n": "newline",
    "\r": "carriage return",
    "\x00": "NUL",
    ";": "semicolon",
    "#": "hash",
    "=": "equals sign",
    '"': "double quote",
    "'": "single quote",
    ",": "comma",
}


class InvalidPoolName(CodedError, ValueError):
    """A pool name PgBouncer cannot serve or the panel refuses; the message is for the user
    (code ``pool.name_invalid``, field ``name``, rendered in the user's language)."""

    def __init__(self, message: str, **params: object) -> None:
        super().__init__(message, field="name", code="pool.name_invalid", params=params)


class ConfigError(ValueError):
    """A configuration that would not load as meant; nothing must be written."""


@dataclass(frozen=True)
class PoolSpec:
    """One ``[databases]`` entry: what the user asked for in the pool form.

    ``user=None`` makes an inbound-user pool (whoever connects is logged in to the server).
    There is no password: PgBouncer reaches the server over its Unix socket, where the server
    authenticates PgBouncer's OS user (``peer``, through a ``pg_ident.conf`` map), so the file holds
    no role's password for fixed-user and inbound-user pools alike.
    """

    name: str
    dbname: str
    user: str | None
    mode: str
    size: int


@dataclass(frozen=True)
class ServerTarget:
    """Where PgBouncer reaches the PostgreSQL server: a host name or a Unix-socket directory."""

    host: str
    port: int

    @property
    def is_unix_socket(self) -> bool:
        return self.host.startswith("/")


@dataclass(frozen=True)
class GlobalSettings:
    """The ``[pgbouncer]`` section. Each default says why it was chosen."""

    listen_port: int
    unix_socket_dir: str
    auth_file: str
    logfile: str
    pidfile: str
    client_tls_key_file: str
    client_tls_cert_file: str
    admin_users: tuple[str, ...]
    # Same interface as the clusters' PostgreSQL (PANEL_LISTEN_ADDRESSES); the panel passes it on.
    listen_addr: str = "127.0.0.1"
    # Clients log in with SCRAM against the auth file, which holds each role's verifier exactly as
    # pg_authid has it (never a password); the server side is peer authentication over the socket.
    auth_type: str = "scram-sha-256"
    # With auth_type "hba": the file that says which method each address gets (pgbouncer_hba).
    auth_hba_file: str | None = None
    # Connection details promise sslmode=require, as on the managed service.
    client_tls_sslmode: str = "require"
    # Only needed to verify client certificates, which sslmode=require does not ask for.
    client_tls_ca_file: str | None = None
    # None = derived from the target: "disable" over the Unix socket (TLS is pointless there and
    # pg_hba allows the socket without it), "require" over TCP (the clusters' pg_hba is hostssl only).
    server_tls_sslmode: str | None = None
    # Roles that may run SHOW commands without admin rights (monitoring).
    stats_users: tuple[str, ...] = ()
    # Clients wait in PgBouncer's queue instead of being refused: room for the 150-client story
    # and more; each client costs one file descriptor, so the supervisor should raise RLIMIT_NOFILE.
    max_client_conn: int = 1000
    # Every panel pool sets its own pool_size; 1 keeps a hand-added line from eating the budget.
    default_pool_size: int = 1
    # Idle server connections hold the server's slots: with PgBouncer's 600 s a busy pool locked
    # direct clients out for ten minutes after its load stopped; 60 s gives them back in about a
    # minute. PgBouncer 1.18 has no per-database idle timeout, so it is one value for all pools.
    server_idle_timeout: int = 60
    # Seconds before logging in to the server again after a failed login (PgBouncer's default 15
    # would refuse clients that long after a failover): 1 for a cluster with standbys.
    server_login_retry: int | None = None
    # PgBouncer's default; runs only when a session-mode client leaves, so state never leaks.
    server_reset_query: str = "DISCARD ALL"
    # pgbench and JDBC send extra_float_digits at startup; PgBouncer refuses unknown parameters.
    ignore_startup_parameters: tuple[str, ...] = ("extra_float_digits",)
    # PgBouncer's default; pgbench's small statements never need a larger buffer.
    pkt_buf: int = 4096
    # PgBouncer logs every login and logout by default: two lines per connection, which under
    # connection churn (a web app without a pool of its own, pgbench -C) is most of the log and
    # grows it without bound (about 300 bytes per connection), and a formatted write per event in
    # the pooler's single thread. Off, as in PostgreSQL; refused logins and pooler errors are still
    # logged (log_pooler_errors), and SHOW STATS counts connections. scripts/perf/pool_cost.py.
    log_connections: bool = False
    log_disconnections: bool = False
    # Only the panel (the same Unix user, or root) talks to the admin console over the socket.
    unix_socket_mode: str = "0700"


# --- names -------------------------------------------------------------------------------------


def describe_char(char: str) -> str:
    """``' ' (space)``, ``';' (semicolon)``, ``'ö' (U+00F6)``: how a message names a character."""
    if char in _CHAR_NAMES:
        shown = "\\n" if char == "\n" else "\\t" if char == "\t" else "\\r" if char == "\r" else char
        if char == "\x00":
            shown = "\\0"
        return f"'{shown}' ({_CHAR_NAMES[char]})"
    if char.isprintable():
        return f"'{char}' (U+{ord(char):04X})"
    return f"U+{ord(char):04X} (a control character)"


# The names of _CHAR_NAMES for the user's language (makemessages reads them here).
_CHAR_TERMS = {
    "space": N_("space"),
    "tab": N_("tab"),
    "newline": N_("newline"),
    "carriage return": N_("carriage return"),
    "semicolon": N_("semicolon"),
    "hash": N_("hash"),
    "equals sign": N_("equals sign"),
    "double quote": N_("double quote"),
    "single quote": N_("single quote"),
    "comma": N_("comma"),
    "a control character": N_("a control character"),
}


def _name_refusal(char: str) -> InvalidPoolName:
    """The refusal of a character in a pool name, named as ``describe_char`` names it, the name
    in the user's language: ``' ' (space)`` / ``' ' (Leerzeichen)``, ``'ö' (U+00F6)``."""
    shown, _, what = describe_char(char).partition(" (")
    what = what.removesuffix(")")
    return InvalidPoolName(
        N_("Pool names may contain only letters, digits, '_', '.' and '-'; found %(char)s (%(what)s)."),
        char=shown,
        what=Term(_CHAR_TERMS[what]) if what in _CHAR_TERMS else what,
    )


def validate_pool_name(name: str) -> str:
    """Return ``name`` if it can be a pool name, else raise ``InvalidPoolName`` saying why."""
    if not name:
        raise InvalidPoolName(N_("A pool name is required."))
    for char in name:
        if not _POOL_NAME_RE.fullmatch(char):
            raise _name_refusal(char)
    if not POOL_NAME_MIN <= len(name) <= POOL_NAME_MAX:
        raise InvalidPoolName(
            N_("A pool name must be %(min)s to %(max)s characters long; this one has %(length)s."),
            min=POOL_NAME_MIN,
            max=POOL_NAME_MAX,
            length=len(name),
        )
    # PgBouncer compares names case-sensitively, so "PgBouncer" would load; refusing every
    # spelling keeps anyone from mistaking a pool for the admin console.
    if name.lower() == ADMIN_DATABASE:
        raise InvalidPoolName(
            N_("'%(name)s' is reserved: PgBouncer's admin console is the database '%(admin)s'."),
            name=name,
            admin=ADMIN_DATABASE,
        )
    return name


# --- values ------------------------------------------------------------------------------------


def _check_text(value: str, what: str) -> None:
    """Refuse what would cut or shift an ini line: control characters, blanks at either end."""
    if not isinstance(value, str):
        raise ConfigError(f"{what} must be text, not {type(value).__name__}.")
    if not value:
        raise ConfigError(f"{what} must not be empty.")
    for char in value:
        if not char.isprintable() and char != " ":
            raise ConfigError(f"{what} must not contain {describe_char(char)}.")
        if char in ";#":
            raise ConfigError(f"{what} must not contain {describe_char(char)}: {value!r}.")
    if value != value.strip():
        raise ConfigError(f"{what} must not start or end with blanks: {value!r}.")


def _check_identifier(value: str, what: str) -> None:
    _check_text(value, what)
    if len(value.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise ConfigError(f"{what} must be at most {MAX_IDENTIFIER_BYTES} bytes long: {value!r}.")


def _check_path(value: str, what: str) -> None:
    _check_text(value, what)
    if not value.startswith("/"):
        raise ConfigError(f"{what} must be an absolute path: {value!r}.")


def _check_int(value: int, what: str, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be a whole number, not {value!r}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise ConfigError(f"{what} must be {bound}; got {value}.")


def _check_choice(value: str, what: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{what} must be one of {', '.join(choices)}; got {value!r}.")


def _check_user_list(users: Iterable[str], what: str) -> None:
    if isinstance(users, str):
        raise ConfigError(f"{what} must be a list of role names, not one string.")
    for user in users:
        _check_identifier(user, f"A role in {what}")
        for char in user:
            if char in ", '\"":
                raise ConfigError(f"A role in {what} must not contain {describe_char(char)}: {user!r}.")


def quote_cstr_value(value: str) -> str:
    """A connection-string value as PgBouncer's ``cstr_get_value`` reads it back."""
    if _SAFE_CSTR_VALUE_RE.fullmatch(value):
        return value
    return "'" + value.replace("'", "''") + "'"


# --- validation --------------------------------------------------------------------------------


def validate_target(target: ServerTarget) -> None:
    if target.is_unix_socket:
        _check_path(target.host, "The server's socket directory")
    else:
        _check_text(target.host, "The server host")
        if not _HOST_NAME_RE.fullmatch(target.host):
            raise ConfigError(f"The server host must be one host name or IP address: {target.host!r}.")
    _check_int(target.port, "The server port", 1, 65535)


def validate_pool(pool: PoolSpec) -> None:
    try:
        validate_pool_name(pool.name)
    except InvalidPoolName as exc:
        raise ConfigError(f"Pool {pool.name!r}: {exc}") from exc
    _check_identifier(pool.dbname, f"Pool {pool.name!r}: the database name")
    if pool.user is not None:
        _check_identifier(pool.user, f"Pool {pool.name!r}: the user name")
    _check_choice(pool.mode, f"Pool {pool.name!r}: the mode", POOL_MODES)
    _check_int(pool.size, f"Pool {pool.name!r}: the size", 1)


def validate_globals(settings: GlobalSettings) -> None:
    _check_text(settings.listen_addr, "listen_addr")
    if not _LISTEN_ADDR_RE.fullmatch(settings.listen_addr):
        raise ConfigError(
            f"listen_addr must be '*' or a comma-separated address list: {settings.listen_addr!r}."
        )
    _check_int(settings.listen_port, "listen_port", 1, 65535)
    for field in ("unix_socket_dir", "auth_file", "logfile", "pidfile"):
        _check_path(getattr(settings, field), field)
    _check_choice(settings.auth_type, "auth_type", AUTH_TYPES)
    if settings.auth_type == "hba" or settings.auth_hba_file is not None:
        if settings.auth_type != "hba" or settings.auth_hba_file is None:
            raise ConfigError(
                "auth_type hba and auth_hba_file go together: one is useless without the other."
            )
        _check_path(settings.auth_hba_file, "auth_hba_file")
    _check_choice(settings.client_tls_sslmode, "client_tls_sslmode", SSL_MODES)
    if settings.client_tls_sslmode != "disable":
        _check_path(settings.client_tls_key_file, "client_tls_key_file")
        _check_path(settings.client_tls_cert_file, "client_tls_cert_file")
    if settings.client_tls_ca_file is not None:
        _check_path(settings.client_tls_ca_file, "client_tls_ca_file")
    if settings.server_tls_sslmode is not None:
        _check_choice(settings.server_tls_sslmode, "server_tls_sslmode", SSL_MODES)
    if not settings.admin_users:
        raise ConfigError("admin_users must name at least one role: the panel needs the admin console.")
    _check_user_list(settings.admin_users, "admin_users")
    _check_user_list(settings.stats_users, "stats_users")
    _check_int(settings.max_client_conn, "max_client_conn", 1)
    _check_int(settings.default_pool_size, "default_pool_size", 1)
    _check_int(settings.server_idle_timeout, "server_idle_timeout", 0)
    if settings.server_reset_query:
        _check_text(settings.server_reset_query, "server_reset_query")
    for param in settings.ignore_startup_parameters:
        if not _STARTUP_PARAM_RE.fullmatch(param):
            raise ConfigError(f"ignore_startup_parameters holds an invalid parameter name: {param!r}.")
    _check_int(settings.pkt_buf, "pkt_buf", 512)
    for field in ("log_connections", "log_disconnections"):
        if not isinstance(getattr(settings, field), bool):
            raise ConfigError(f"{field} must be true or false, not {getattr(settings, field)!r}.")
    if not re.fullmatch(r"0[0-7]{3}", settings.unix_socket_mode):
        raise ConfigError(
            f"unix_socket_mode must be an octal mode such as 0700: {settings.unix_socket_mode!r}."
        )


def server_tls_sslmode(settings: GlobalSettings, target: ServerTarget) -> str:
    if settings.server_tls_sslmode is not None:
        return settings.server_tls_sslmode
    return "disable" if target.is_unix_socket else "require"
