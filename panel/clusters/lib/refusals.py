"""What kind of refusal a PostgreSQL server's or libpq's error is, and a program's text without
the paths it names (pure: text in, a kind or text out).

The server's own words are English whatever the page's language, and libpq's name the server's
socket and certificate files: pages show a sentence chosen by the kind (``panel.clusters.services
.failures``), the words go to the log. ``kind`` reads the SQLSTATE first; libpq keeps none for a
refusal while connecting, so its English text (LC_MESSAGES=C for the panel's programs) is read then.
"""

from __future__ import annotations

import re

DUPLICATE = "duplicate"
PRIVILEGE = "privilege"
INVALID_NAME = "invalid_name"
IN_USE = "in_use"
DEPENDENTS = "dependents"
MISSING = "missing"
NO_DATABASE = "no_database"
TOO_MANY_CLIENTS = "too_many_clients"
AUTHENTICATION = "authentication"
STARTING = "starting"
TIMEOUT = "timeout"
REFUSED = "refused"
UNKNOWN_HOST = "unknown_host"
TLS = "tls"
CLOSED = "closed"
OTHER = "other"

_BY_SQLSTATE = {
    "42710": DUPLICATE,  # duplicate_object (a role)
    "42P04": DUPLICATE,  # duplicate_database
    "42P07": DUPLICATE,  # duplicate_table
    "42501": PRIVILEGE,  # insufficient_privilege
    "42602": INVALID_NAME,  # invalid_name
    "42622": INVALID_NAME,  # name_too_long
    "42939": INVALID_NAME,  # reserved_name
    "55006": IN_USE,  # object_in_use
    "2BP01": DEPENDENTS,  # dependent_objects_still_exist
    "42704": MISSING,  # undefined_object
    "3D000": NO_DATABASE,  # invalid_catalog_name
    "53300": TOO_MANY_CLIENTS,  # too_many_connections
    "28P01": AUTHENTICATION,  # invalid_password
    "28000": AUTHENTICATION,  # invalid_authorization_specification
    "57P03": STARTING,  # cannot_connect_now
    "57014": TIMEOUT,  # query_canceled (statement_timeout)
    "55P03": TIMEOUT,  # lock_not_available (lock_timeout)
}

# libpq's and the server's English texts, first match wins (the order matters: a refused login
# names the socket it went through too).
_BY_TEXT: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"too many clients already|remaining connection slots are reserved"), TOO_MANY_CLIENTS),
    (re.compile(r"database \"[^\"]*\" does not exist"), NO_DATABASE),
    (
        re.compile(
            r"password authentication failed|no password supplied|role \"[^\"]*\" does not exist"
            r"|authentication method requirement|server did not complete authentication"
            r"|no pg_hba\.conf entry|pg_hba\.conf rejects connection|fe_sendauth"
        ),
        AUTHENTICATION,
    ),
    (re.compile(r"the database system is (?:starting up|shutting down|in recovery mode)"), STARTING),
    (re.compile(r"SSL|certificate|\bTLS\b"), TLS),
    (
        re.compile(r"could not translate host name|Name or service not known|Temporary failure in name"),
        UNKNOWN_HOST,
    ),
    (re.compile(r"timeout expired|timed out|canceling statement due to"), TIMEOUT),
    (
        re.compile(r"Connection refused|No such file or directory|Network is unreachable|No route to host"),
        REFUSED,
    ),
    (re.compile(r"server closed the connection unexpectedly|terminating connection"), CLOSED),
)


def kind(sqlstate: str | None, text: str) -> str:
    """The kind of refusal (one of this module's names; ``OTHER`` when it is none of them)."""
    if sqlstate and sqlstate in _BY_SQLSTATE:
        return _BY_SQLSTATE[sqlstate]
    for pattern, found in _BY_TEXT:
        if pattern.search(text):
            return found
    return OTHER


SOCKET_WORDS = "the server's socket"
PATH_WORDS = "…"

_SOCKET = re.compile(r"(?:on )?socket \"[^\"]*\"")
_QUOTED_PATH = re.compile(r"([\"'])/[^\"']*\1")
_PATH = re.compile(r"(?<![\w.~/:-])/(?:[\w.@+~-]+/)+[\w.@+~-]*")


def without_paths(text: str) -> str:
    """``text`` (a program's message) without the file and socket paths it names: libpq's
    ``on socket "/…/.s.PGSQL.5432"`` becomes ``on the server's socket``, any other absolute path ``…``.
    The rest of the words stay as the program wrote them."""
    text = _SOCKET.sub(lambda match: ("on " if match.group(0).startswith("on ") else "") + SOCKET_WORDS, text)
    text = _QUOTED_PATH.sub(PATH_WORDS, text)
    return _PATH.sub(PATH_WORDS, text)
