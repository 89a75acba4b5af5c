"""Validation of cluster names and PostgreSQL identifiers (pure, no Django)."""

from __future__ import annotations

import re

CLUSTER_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{1,61}[a-z0-9]$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$-]*$")
MAX_IDENTIFIER_BYTES = 63

# Names PostgreSQL itself or the panel uses; refusing them keeps users out of trouble.
RESERVED_ROLE_PREFIXES = ("pg_",)
RESERVED_ROLES = frozenset(
    {
        "public",
        "none",
        "current_user",
        "session_user",
        "current_role",
        "postgres",
        "pgpanel",
        "pgpanel_monitor",
        "pgbouncer",
        "doadmin",
    }
)
RESERVED_DATABASES = frozenset(
    {"template0", "template1", "postgres", "pgbouncer", "defaultdb", "pgpanel_template"}
)


class InvalidName(ValueError):
    """A name that cannot be used; the message says why, for the person who typed it."""


def validate_cluster_name(name: str) -> str:
    if not 3 <= len(name) <= 63:
        raise InvalidName("A cluster name must be 3 to 63 characters long.")
    if not CLUSTER_NAME_RE.match(name):
        raise InvalidName(
            "A cluster name may hold lowercase letters, digits and hyphens, must start with a "
            "letter and must not end with a hyphen."
        )
    return name


NODE_NAME_RE = re.compile(r"^[A-Za-z0-9-]{1,40}$")


def validate_node_name(name: str) -> str:
    """A node's name: it names the queues ``node.<name>`` and ``node.<name>.tasks``."""
    if not NODE_NAME_RE.match(name):
        raise InvalidName("A node name is 1–40 letters, digits and hyphens (it names the queue node.<name>).")
    if not name[0].isalnum():
        raise InvalidName("A node name starts with a letter or a digit.")
    return name


def _validate_identifier(name: str, what: str) -> str:
    if not name:
        raise InvalidName(f"A {what} name is required.")
    if len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise InvalidName(f"A {what} name must be at most {MAX_IDENTIFIER_BYTES} bytes long.")
    if not IDENTIFIER_RE.match(name):
        raise InvalidName(
            f"A {what} name must start with a letter or underscore and hold only letters, "
            "digits, underscores, hyphens and dollar signs."
        )
    return name


def validate_role_name(name: str) -> str:
    _validate_identifier(name, "user")
    lowered = name.lower()
    if lowered in RESERVED_ROLES or lowered.startswith(RESERVED_ROLE_PREFIXES):
        raise InvalidName(f"“{name}” is reserved; choose another user name.")
    return name


def validate_database_name(name: str) -> str:
    _validate_identifier(name, "database")
    if name.lower() in RESERVED_DATABASES:
        raise InvalidName(f"“{name}” is reserved; choose another database name.")
    return name
