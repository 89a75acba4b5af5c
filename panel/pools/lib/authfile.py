"""PgBouncer's ``auth_file`` and SCRAM-SHA-256 verifiers as PostgreSQL stores them (pure, no Django).

PgBouncer authenticates clients with the secret it finds here and, for inbound-user pools, logs in
to the server with the SCRAM keys the client's proof revealed; that works only when the secret is
byte for byte the one in ``pg_authid`` (same salt and iterations), so the panel copies it from there.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass

from panel.core import scram
from panel.core.scram import SCRAM_ITERATIONS, scram_keys

_KEY_BYTES = hashlib.sha256().digest_size
_SCRAM_RE = re.compile(
    r"SCRAM-SHA-256\$(?P<iterations>[1-9][0-9]*):(?P<salt>[A-Za-z0-9+/]+={0,2})"
    r"\$(?P<stored_key>[A-Za-z0-9+/]+={0,2}):(?P<server_key>[A-Za-z0-9+/]+={0,2})"
)
_MD5_RE = re.compile(r"md5[0-9a-f]{32}")
# PgBouncer's MAX_USERNAME counts the quoted field; PostgreSQL's limit (63 bytes) is lower anyway.
MAX_ROLE_BYTES = 63


class AuthFileError(ValueError):
    """A role or secret that would break ``auth_file`` or could never authenticate."""


@dataclass(frozen=True)
class ScramSecret:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes


def parse_scram_verifier(verifier: str) -> ScramSecret:
    """Split ``SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>``; raise ``AuthFileError`` if malformed."""
    match = _SCRAM_RE.fullmatch(verifier)
    if match is None:
        raise AuthFileError("Not a SCRAM-SHA-256 verifier.")
    try:
        salt = base64.b64decode(match["salt"], validate=True)
        stored_key = base64.b64decode(match["stored_key"], validate=True)
        server_key = base64.b64decode(match["server_key"], validate=True)
    except binascii.Error as exc:
        raise AuthFileError(f"A SCRAM verifier holds invalid base64: {exc}.") from exc
    if len(stored_key) != _KEY_BYTES or len(server_key) != _KEY_BYTES or not salt:
        raise AuthFileError("A SCRAM verifier's keys must be 32 bytes and its salt non-empty.")
    return ScramSecret(int(match["iterations"]), salt, stored_key, server_key)


def scram_sha256_verifier(
    password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    """A verifier in PostgreSQL's format, e.g. for an admin role that exists only in PgBouncer."""
    if iterations < 1:
        raise AuthFileError("SCRAM iterations must be at least 1.")
    if salt is not None and not salt:
        raise AuthFileError("A SCRAM salt must not be empty.")
    return scram.verifier(password, salt, iterations)


def scram_verifier_matches(verifier: str, password: str) -> bool:
    """Whether ``password`` is the one ``verifier`` was made from (to spot a changed password)."""
    secret = parse_scram_verifier(verifier)
    stored_key, server_key = scram_keys(password, secret.salt, secret.iterations)
    return hmac.compare_digest(stored_key, secret.stored_key) and hmac.compare_digest(
        server_key, secret.server_key
    )


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def validate_secret(secret: str) -> str:
    if _MD5_RE.fullmatch(secret):
        return secret
    try:
        parse_scram_verifier(secret)
    except AuthFileError as exc:
        raise AuthFileError(
            "A secret must be a SCRAM-SHA-256 verifier or an md5 hash as pg_authid stores it; "
            f"plain-text passwords are not written here ({exc})"
        ) from exc
    return secret


def validate_role(role: str) -> str:
    if not role:
        raise AuthFileError("A role name must not be empty.")
    for char in role:
        if not char.isprintable():
            raise AuthFileError(f"Role {role!r} contains U+{ord(char):04X}, which would break the auth file.")
    if len(role.encode("utf-8")) > MAX_ROLE_BYTES:
        raise AuthFileError(f"Role {role!r} is longer than {MAX_ROLE_BYTES} bytes.")
    return role


def render_auth_file(secrets: dict[str, str]) -> str:
    """``"role" "secret"`` lines sorted by role; ``"`` inside a field is written ``""``."""
    lines = [";; Written by the control panel; edits here are overwritten."]
    for role in sorted(secrets):
        validate_role(role)
        try:
            validate_secret(secrets[role])
        except AuthFileError as exc:
            raise AuthFileError(f"Role {role!r}: {exc}") from exc
        lines.append(f"{_quote(role)} {_quote(secrets[role])}")
    return "\n".join(lines) + "\n"


def parse_auth_file(text: str) -> dict[str, str]:
    """Read an auth file back the way PgBouncer's ``load_auth_file`` does (first two fields)."""
    entries: dict[str, str] = {}
    field = r'"((?:[^"]|"")*)"'
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        match = re.match(field + r"\s*" + field, line)
        if match is None:
            raise AuthFileError(f"Line {number} of the auth file is broken: {raw!r}.")
        entries[match[1].replace('""', '"')] = match[2].replace('""', '"')
    return entries
