"""Which of a cluster's roles the panel made: the panel alters, resets or drops a role of its own
(``settings.PANEL_ROLES``) only if it made it, never a role of that name somebody else made (a
tenant's ``pgpanel_replication``, made before its name was reserved, would otherwise become the
panel's replication role, with the password the panel then hands to replicas).

The panel marks a role it makes with a comment only it can write: a MAC, under the panel's
encryption key, of the server's system identifier, the role's OID and its name. A tenant can read
the comment but not make one for another role (another OID) or another cluster (another system
identifier); the guard refuses it ``COMMENT ON ROLE`` of a reserved role anyway. A physical copy
(a replica, a standby, a restore, a promoted replica) keeps all three, so the mark holds there.
A role made before the mark existed is recognised by its password: its SCRAM secret checks
against the password the panel keeps for it, which nobody else knows.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Sequence

import psycopg
from django.conf import settings
from psycopg import sql

from panel.clusters.engine import dbconn

MARK_PREFIX = "pgpanel role "
# The panel's secrets are libpq's (4096 iterations); a role's secret is anybody's to choose
# (ALTER ROLE … PASSWORD 'SCRAM-SHA-256$…'), so the check never computes more than this.
MAX_SCRAM_ITERATIONS = 100_000


class NotPanelRole(dbconn.DatabaseError):
    """A role with one of the panel's names that the panel did not make (a DatabaseError: where
    the panel reports a server's refusal, it reports this one too)."""

    def __init__(self, role: str) -> None:
        super().__init__(f"A role named {role!r} exists that the panel did not make; it is left as it is.")
        self.role = role


def _mac(system_identifier: int, oid: int, role: str) -> str:
    key = hashlib.sha256(b"pgpanel role mark\0" + settings.PANEL_ENCRYPTION_KEY.encode()).digest()
    message = f"{system_identifier}/{oid}/{role}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _identity(conn: psycopg.Connection, role: str) -> tuple[int, int, str, str | None] | None:
    """The server's system identifier, the role's OID, its comment and SCRAM secret; None when
    there is no such role."""
    row = conn.execute(
        "SELECT (SELECT system_identifier FROM pg_catalog.pg_control_system()), a.oid::bigint, "
        "coalesce(pg_catalog.shobj_description(a.oid, 'pg_authid'), ''), a.rolpassword "
        "FROM pg_catalog.pg_authid a WHERE a.rolname = %s",
        [role],
    ).fetchone()
    return None if row is None else (int(row[0]), int(row[1]), str(row[2]), row[3])


def mark(conn: psycopg.Connection, role: str) -> None:
    """Mark ``role`` (just made by the panel, as the superuser) as the panel's."""
    identity = _identity(conn, role)
    assert identity is not None, role
    system_identifier, oid, _comment, _secret = identity
    conn.execute(
        sql.SQL("COMMENT ON ROLE {} IS {}").format(
            sql.Identifier(role), sql.Literal(MARK_PREFIX + _mac(system_identifier, oid, role))
        )
    )


def scram_checks(secret: str | None, password: str) -> bool:
    """Whether a ``SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey`` secret is the one of
    ``password`` (RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")))."""
    if not secret or not password or not secret.startswith("SCRAM-SHA-256$"):
        return False
    try:
        _method, iterations_salt, keys = secret.split("$")
        iterations, salt = iterations_salt.split(":")
        stored_key = base64.b64decode(keys.split(":")[0], validate=True)
        if not 0 < int(iterations) <= MAX_SCRAM_ITERATIONS:
            return False  # not the panel's (libpq's 4096), and no work made to order
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    except ValueError:
        return False
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)


def claim(conn: psycopg.Connection, role: str, known_password: Callable[[], str] = lambda: "") -> bool:
    """Whether ``role`` exists and is the panel's (marked, or older than the mark with the
    password the panel keeps for it, ``known_password()``, then marked now); False if there is no
    such role. Raises NotPanelRole if a role of that name exists that the panel did not make.
    As the superuser, inside the caller's transaction (under its lock)."""
    identity = _identity(conn, role)
    if identity is None:
        return False
    system_identifier, oid, comment, secret = identity
    if hmac.compare_digest(comment.encode(), (MARK_PREFIX + _mac(system_identifier, oid, role)).encode()):
        return True
    if scram_checks(secret, known_password()):  # older than the mark (or a key since changed)
        mark(conn, role)
        return True
    raise NotPanelRole(role)


def ensure(
    conn: psycopg.Connection,
    role: str,
    attributes: sql.Composable,
    *,
    keep: Sequence[str] = (),
    known_password: Callable[[], str] = lambda: "",
) -> None:
    """Create or repair one of the panel's roles, as the superuser inside the caller's transaction:
    NotPanelRole if a role of that name exists that the panel did not make (``claim``); else
    CREATE or ALTER it with ``attributes``, mark it, reset its role settings, and revoke every
    membership it holds but ``keep`` and every member it has. Memberships somebody else granted
    (a CREATEROLE tenant on PostgreSQL 15) would widen what the role may do, or let that somebody
    act as it. The caller grants what the role needs afterwards."""
    ident = sql.Identifier(role)
    # One at a time: concurrent ALTER ROLEs of one role fail ("tuple concurrently updated").
    conn.execute("SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext(%s))", [role])
    exists = claim(conn, role, known_password)
    conn.execute(
        sql.SQL("{} ROLE {} WITH {}").format(sql.SQL("ALTER" if exists else "CREATE"), ident, attributes)
    )
    if not exists:
        mark(conn, role)
    conn.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(ident))
    related = conn.execute(
        "SELECT pg_catalog.pg_get_userbyid(roleid), pg_catalog.pg_get_userbyid(member) "
        "FROM pg_catalog.pg_auth_members WHERE (member = %s::pg_catalog.regrole "
        "AND pg_catalog.pg_get_userbyid(roleid) <> ALL(%s)) OR roleid = %s::pg_catalog.regrole",
        [role, list(keep), role],
    ).fetchall()
    for granted, member in related:
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), sql.Identifier(member)))


def grant_maintenance_connect(conn: psycopg.Connection, role: str) -> None:
    """CONNECT to the maintenance database, where the panel's roles log in."""
    conn.execute(
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(dbconn.MAINTENANCE_DATABASE), sql.Identifier(role)
        )
    )


def ensure_monitor_role(
    conn: psycopg.Connection, role: str, password: str, previous_password: str = ""
) -> None:
    """Create or repair the monitor role, as the superuser in the maintenance database: LOGIN,
    member of pg_monitor and nothing else, no other attribute, no member, no role setting,
    CONNECT to the maintenance database; ``password`` becomes its password. A role of that name
    the panel did not make (``previous_password`` is the one the panel kept for its own) is
    refused with NotPanelRole, not repaired."""
    # INHERIT: pg_monitor's rights (pg_read_all_stats, pg_read_all_settings…) only work inherited.
    attributes = sql.SQL(
        "LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD {}"
    ).format(sql.Literal(dbconn.scram_verifier(conn, role, password)))
    with conn.transaction():
        ensure(conn, role, attributes, keep=("pg_monitor",), known_password=lambda: previous_password)
        conn.execute(sql.SQL("GRANT pg_monitor TO {}").format(sql.Identifier(role)))
        grant_maintenance_connect(conn, role)
