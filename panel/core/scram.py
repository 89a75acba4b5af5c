"""SCRAM-SHA-256 secrets as PostgreSQL stores them (RFC 5802, RFC 7677; pure, no Django): the
keys of a password and the ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` verifier,
for PgBouncer's auth file and for a superuser password set before a server first listens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import stringprep
import unicodedata

SCRAM_ITERATIONS = 4096  # PostgreSQL's scram_iterations default
SCRAM_SALT_BYTES = 16  # what PostgreSQL generates


def saslprep(password: str) -> str:
    """RFC 4013 SASLprep as PostgreSQL applies it: when a step fails, the raw password is used."""
    if password.isascii():
        return password
    mapped = "".join(
        " " if stringprep.in_table_c12(char) else char
        for char in password
        if not stringprep.in_table_b1(char)
    )
    prepared = unicodedata.normalize("NFKC", mapped)
    prohibited = (
        stringprep.in_table_a1,
        stringprep.in_table_c12,
        stringprep.in_table_c21_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
    )
    if not prepared or any(check(char) for char in prepared for check in prohibited):
        return password
    if any(stringprep.in_table_d1(char) for char in prepared) and (
        any(stringprep.in_table_d2(char) for char in prepared)
        or not (stringprep.in_table_d1(prepared[0]) and stringprep.in_table_d1(prepared[-1]))
    ):
        return password
    return prepared


def scram_keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """``(StoredKey, ServerKey)`` per RFC 5802 with SHA-256 (RFC 7677)."""
    salted = hashlib.pbkdf2_hmac("sha256", saslprep(password).encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return stored_key, server_key


def verifier(password: str, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The secret PostgreSQL keeps for ``password`` (a new random salt unless given)."""
    if iterations < 1 or (salt is not None and not salt):
        raise ValueError("SCRAM needs at least one iteration and a non-empty salt.")
    salt = os.urandom(SCRAM_SALT_BYTES) if salt is None else salt
    stored_key, server_key = scram_keys(password, salt, iterations)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"
