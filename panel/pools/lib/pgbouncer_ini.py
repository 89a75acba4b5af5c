"""Rendering one cluster's ``pgbouncer.ini`` from validated specs, and reading one back (pure, no Django).

``render`` validates everything first (``pgbouncer_spec``) and refuses rather than return a file
PgBouncer would misload; the readers split a file the way PgBouncer does, so the panel can compare
what it meant with what is loaded and tell a RELOAD from a restart.
"""

from __future__ import annotations

import re

from panel.pools.lib.pgbouncer_spec import (
    ADMIN_DATABASE,
    POOL_MODES,
    POOL_NAME_MAX,
    POOL_NAME_MIN,
    ConfigError,
    GlobalSettings,
    InvalidPoolName,
    PoolSpec,
    ServerTarget,
    quote_cstr_value,
    server_tls_sslmode,
    validate_globals,
    validate_pool,
    validate_pool_name,
    validate_target,
)

__all__ = [
    "ADMIN_DATABASE",
    "POOL_MODES",
    "POOL_NAME_MAX",
    "POOL_NAME_MIN",
    "RESTART_KEYS",
    "ConfigError",
    "GlobalSettings",
    "InvalidPoolName",
    "PoolSpec",
    "ServerTarget",
    "database_line",
    "needs_restart",
    "parse_connstring",
    "parse_databases_section",
    "quote_cstr_value",
    "render",
    "restart_settings",
    "validate_pool_name",
]

# Settings PgBouncer reads only at start: a change to one of them needs a restart, not a RELOAD.
RESTART_KEYS = frozenset({"listen_addr", "listen_port", "unix_socket_dir", "unix_socket_mode", "pidfile"})

# --- rendering ---------------------------------------------------------------------------------


def database_line(pool: PoolSpec, target: ServerTarget) -> str:
    params = [
        ("host", target.host),
        ("port", str(target.port)),
        ("dbname", pool.dbname),
    ]
    if pool.user is not None:
        params.append(("user", pool.user))
    params.append(("pool_size", str(pool.size)))
    if pool.user is None:
        # An inbound-user pool has one pool per connecting role; this caps their sum at the size
        # the budget granted (PgBouncer evicts idle connections of the other roles when needed).
        params.append(("max_db_connections", str(pool.size)))
    params.append(("pool_mode", pool.mode))
    return f"{pool.name} = " + " ".join(f"{key}={quote_cstr_value(value)}" for key, value in params)


def render(settings: GlobalSettings, target: ServerTarget, pools: list[PoolSpec]) -> str:
    """The whole ``pgbouncer.ini``; raises ``ConfigError`` rather than return a file that misloads."""
    validate_globals(settings)
    validate_target(target)
    if not target.is_unix_socket and any(pool.user is not None for pool in pools):
        # Over TCP the server would ask PgBouncer for the fixed user's password, which it never holds.
        raise ConfigError(
            "A pool with a fixed user needs the server's Unix socket: PgBouncer logs in there by "
            "peer authentication and holds no password."
        )
    seen: set[str] = set()
    for pool in pools:
        validate_pool(pool)
        if pool.name in seen:
            # PgBouncer silently keeps the first of two lines with one name.
            raise ConfigError(f"Two pools are named {pool.name!r}; pool names must be unique.")
        seen.add(pool.name)

    lines = [
        ";; Written by the control panel; edits here are overwritten.",
        "[databases]",
    ]
    lines += [database_line(pool, target) for pool in sorted(pools, key=lambda p: p.name)]
    lines += ["", "[pgbouncer]"]
    values: list[tuple[str, str]] = [
        ("listen_addr", settings.listen_addr),
        ("listen_port", str(settings.listen_port)),
        ("unix_socket_dir", settings.unix_socket_dir),
        ("unix_socket_mode", settings.unix_socket_mode),
        ("pidfile", settings.pidfile),
        ("logfile", settings.logfile),
        ("auth_type", settings.auth_type),
        ("auth_file", settings.auth_file),
    ]
    if settings.auth_hba_file is not None:
        values.append(("auth_hba_file", settings.auth_hba_file))
    values.append(("admin_users", ", ".join(settings.admin_users)))
    if settings.stats_users:
        values.append(("stats_users", ", ".join(settings.stats_users)))
    values.append(("client_tls_sslmode", settings.client_tls_sslmode))
    if settings.client_tls_sslmode != "disable":
        values += [
            ("client_tls_key_file", settings.client_tls_key_file),
            ("client_tls_cert_file", settings.client_tls_cert_file),
        ]
    if settings.client_tls_ca_file is not None:
        values.append(("client_tls_ca_file", settings.client_tls_ca_file))
    values += [
        ("server_tls_sslmode", server_tls_sslmode(settings, target)),
        ("max_client_conn", str(settings.max_client_conn)),
        ("default_pool_size", str(settings.default_pool_size)),
        ("server_idle_timeout", str(settings.server_idle_timeout)),
        *(
            [("server_login_retry", str(settings.server_login_retry))]
            if settings.server_login_retry is not None
            else []
        ),
        ("server_reset_query", settings.server_reset_query),
        ("ignore_startup_parameters", ",".join(settings.ignore_startup_parameters)),
        ("pkt_buf", str(settings.pkt_buf)),
        ("log_connections", "1" if settings.log_connections else "0"),
        ("log_disconnections", "1" if settings.log_disconnections else "0"),
    ]
    lines += [f"{key} = {value}".rstrip() for key, value in values]
    return "\n".join(lines) + "\n"


# --- reading back ------------------------------------------------------------------------------


def parse_connstring(value: str) -> dict[str, str]:
    """Split a ``[databases]`` value the way PgBouncer's ``cstr_get_pair`` does."""
    params: dict[str, str] = {}
    pos = 0
    length = len(value)
    while True:
        while pos < length and value[pos] == " ":
            pos += 1
        if pos >= length:
            return params
        eq = pos
        while eq < length and value[eq] not in "= ":
            eq += 1
        key = value[pos:eq]
        while eq < length and value[eq] == " ":
            eq += 1
        if eq >= length or value[eq] != "=" or not key:
            raise ConfigError(f"Syntax error in connection string: {value!r}.")
        pos = eq + 1
        while pos < length and value[pos] == " ":
            pos += 1
        if pos < length and value[pos] == "'":
            chunks: list[str] = []
            pos += 1
            while True:
                if pos >= length:
                    raise ConfigError(f"Unterminated quote in connection string: {value!r}.")
                if value[pos] == "'":
                    if value[pos + 1 : pos + 2] == "'":
                        chunks.append("'")
                        pos += 2
                        continue
                    pos += 1
                    break
                chunks.append(value[pos])
                pos += 1
            val = "".join(chunks)
        else:
            end = value.find(" ", pos)
            end = length if end < 0 else end
            val = value[pos:end]
            pos = end
        if not val:
            raise ConfigError(f"Empty value for {key!r} in connection string: {value!r}.")
        params[key] = val


def parse_databases_section(text: str) -> dict[str, dict[str, str]]:
    """The ``[databases]`` entries of an ini file as ``{name: {param: value}}``.

    Like PgBouncer, the first of two entries with one name wins; unlike PgBouncer, which stops
    silently at a bad line, a syntax error raises ``ConfigError`` naming the line.
    """
    databases: dict[str, dict[str, str]] = {}
    section = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ConfigError(f"Line {number}: syntax error in section header {raw!r}.")
            section = line[1:-1]
            continue
        key_match = re.match(r"[A-Za-z0-9_.*-]*", line)
        key = key_match.group(0) if key_match else ""
        rest = line[len(key) :].lstrip(" \t")
        if not rest.startswith("="):
            raise ConfigError(f"Line {number}: syntax error {raw!r}.")
        if section != "databases":
            continue
        try:
            params = parse_connstring(rest[1:].strip())
        except ConfigError as exc:
            raise ConfigError(f"Line {number}: {exc}") from exc
        databases.setdefault(key, params)
    return databases


def restart_settings(ini_text: str | None) -> dict[str, str]:
    """The values of ``RESTART_KEYS`` in an ini file's ``[pgbouncer]`` section."""
    values: dict[str, str] = {}
    section = None
    for raw in (ini_text or "").splitlines():
        line = raw.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section == "pgbouncer" and "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            if key in RESTART_KEYS:
                values[key] = value
    return values


def needs_restart(old_ini: str | None, new_ini: str) -> bool:
    """Whether going from ``old_ini`` to ``new_ini`` changes a setting a RELOAD ignores."""
    return old_ini is not None and restart_settings(old_ini) != restart_settings(new_ini)
