"""Validation of every name a user gives: cluster, replica, node, user (role) and database; pool
names follow the same rule in ``panel.pools.lib.pgbouncer_spec`` (pure, no Django).

Each rule is matched against the whole string (``re.fullmatch``): ``re.match`` with ``$`` accepts a
trailing newline, and a name with a newline breaks every file it is written to (issue 29).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from panel.core.errors import N_, CodedError, ServiceError

CLUSTER_NAME_RE = re.compile(r"[a-z][a-z0-9-]{1,61}[a-z0-9]")
IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_$-]*")
MAX_IDENTIFIER_BYTES = 63

# Names PostgreSQL itself gives a meaning (and ``doadmin``, the admin user, and ``pgbouncer``, the
# pooler's name in the server's peer map); the panel's own roles are the caller's
# (``settings.PANEL_ROLES``, the one list the guard reserves too).
RESERVED_ROLE_PREFIXES = ("pg_",)
RESERVED_ROLES = frozenset(
    {
        "public",
        "none",
        "current_user",
        "session_user",
        "current_role",
        "postgres",
        "pgbouncer",
        "doadmin",
    }
)
RESERVED_DATABASES = frozenset(
    {"template0", "template1", "postgres", "pgbouncer", "defaultdb", "pgpanel_template"}
)


class InvalidName(CodedError, ValueError):
    """A name that cannot be used; the message says why, for the person who typed it (a template
    and its parameters, rendered in that person's language)."""

    def __init__(self, message: str, code: str, **params: object) -> None:
        super().__init__(message, code=code, params=params)


def whole(rule: re.Pattern[str], name: str) -> bool:
    """Whether ``rule`` matches all of ``name`` (the one way every name here is checked)."""
    return rule.fullmatch(name) is not None


def validate_cluster_name(name: str) -> str:
    if not 3 <= len(name) <= 63:
        raise InvalidName(N_("A cluster name must be 3 to 63 characters long."), "cluster.name_length")
    if not whole(CLUSTER_NAME_RE, name):
        raise InvalidName(
            N_(
                "A cluster name may hold lowercase letters, digits and hyphens, must start with a "
                "letter and must not end with a hyphen."
            ),
            "cluster.name_invalid",
        )
    return name


def validate_replica_name(name: str) -> str:
    """A read-only node's name: the managed service gives replicas cluster names."""
    if not 3 <= len(name) <= 63 or not whole(CLUSTER_NAME_RE, name):
        raise InvalidName(
            N_(
                "A replica name is 3 to 63 lowercase letters, digits and hyphens, starts with a "
                "letter and does not end with a hyphen."
            ),
            "replica.name_invalid",
        )
    return name


NODE_NAME_RE = re.compile(r"[A-Za-z0-9-]{1,40}")


def validate_node_name(name: str) -> str:
    """A node's name: it names the queues ``node.<name>`` and ``node.<name>.tasks``."""
    if not whole(NODE_NAME_RE, name):
        raise InvalidName(
            N_("A node name is 1–40 letters, digits and hyphens (it names the queue node.<name>)."),
            "node.name_invalid",
        )
    if not name[0].isalnum():
        raise InvalidName(N_("A node name starts with a letter or a digit."), "node.name_invalid")
    return name


# One sentence per kind of name: the words differ by language (Benutzername, Datenbankname).
_IDENTIFIER_MESSAGES = {
    "user": (
        N_("A user name is required."),
        N_("A user name must be at most %(max)s bytes long."),
        N_(
            "A user name must start with a letter or underscore and hold only letters, "
            "digits, underscores, hyphens and dollar signs."
        ),
    ),
    "database": (
        N_("A database name is required."),
        N_("A database name must be at most %(max)s bytes long."),
        N_(
            "A database name must start with a letter or underscore and hold only letters, "
            "digits, underscores, hyphens and dollar signs."
        ),
    ),
}


def _validate_identifier(name: str, what: str) -> str:
    required, too_long, invalid = _IDENTIFIER_MESSAGES[what]
    if not name:
        raise InvalidName(required, f"{what}.name_required")
    if len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise InvalidName(too_long, f"{what}.name_too_long", max=MAX_IDENTIFIER_BYTES)
    if not whole(IDENTIFIER_RE, name):
        raise InvalidName(invalid, f"{what}.name_invalid")
    return name


def validate_role_name(name: str, panel_roles: Collection[str]) -> str:
    """A user's name, refused if PostgreSQL or the panel uses it: ``panel_roles`` are the roles
    the panel makes (``settings.PANEL_ROLES``)."""
    _validate_identifier(name, "user")
    lowered = name.lower()
    reserved = RESERVED_ROLES | {role.lower() for role in panel_roles}
    if lowered in reserved or lowered.startswith(RESERVED_ROLE_PREFIXES):
        raise InvalidName(
            N_("“%(name)s” is reserved; choose another user name."), "user.name_reserved", name=name
        )
    return name


def validate_database_name(name: str) -> str:
    _validate_identifier(name, "database")
    if name.lower() in RESERVED_DATABASES:
        raise InvalidName(
            N_("“%(name)s” is reserved; choose another database name."), "database.name_reserved", name=name
        )
    return name


# What the web's confirmation asks: "Type the name …" (the cluster's own is in services/lifecycle).
_TYPED_NAME_MESSAGES = {
    "database": N_("Type the database name “%(name)s” to confirm."),
    "user": N_("Type the user name “%(name)s” to confirm."),
    "replica": N_("Type the replica name “%(name)s” to confirm."),
}


def require_typed_name(what: str, name: str, typed: str | None) -> None:
    """A destructive action the web asks with a typed name (a delete, a promote) runs only when
    ``typed`` is ``name``: a forged or replayed POST without it changes nothing. None: the caller
    asks no typed name (the API, the command line, the panel's own steps)."""
    if typed is not None and typed != name:
        raise InvalidName(_TYPED_NAME_MESSAGES[what], f"{what}.confirm_name_mismatch", name=name)


def name_taken(name: str) -> ServiceError:
    """The refusal of a cluster name its owner already has (create, attach)."""
    return ServiceError(
        N_("You already have a cluster named “%(name)s”."),
        field="name",
        code="cluster.name_taken",
        params={"name": name},
    )
