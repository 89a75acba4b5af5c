"""auth_file rendering and SCRAM-SHA-256 verifiers, checked by hand and against libpq."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

import pytest
from psycopg import pq

from panel.core.scram import saslprep
from panel.pools.lib.authfile import (
    AuthFileError,
    parse_auth_file,
    parse_scram_verifier,
    render_auth_file,
    scram_sha256_verifier,
    scram_verifier_matches,
)

SALT = bytes(range(16))


def by_hand(password: bytes, salt: bytes, iterations: int) -> str:
    """RFC 5802 section 3, spelled out with hashlib and hmac only."""
    # Hi() is PBKDF2 with HMAC as the PRF and one block: U1 = HMAC(p, salt + INT(1)), Ui = HMAC(p, Ui-1).
    u = hmac.new(password, salt + b"\x00\x00\x00\x01", hashlib.sha256).digest()
    salted = bytearray(u)
    for _ in range(iterations - 1):
        u = hmac.new(password, u, hashlib.sha256).digest()
        salted = bytearray(a ^ b for a, b in zip(salted, u, strict=True))
    client_key = hmac.new(bytes(salted), b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(bytes(salted), b"Server Key", hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def test_the_verifier_matches_rfc_5802_computed_by_hand() -> None:
    assert scram_sha256_verifier("pencil", SALT, 4096) == by_hand(b"pencil", SALT, 4096)
    assert scram_sha256_verifier("pencil", SALT, 1) == by_hand(b"pencil", SALT, 1)


def test_the_verifier_has_postgresql_format() -> None:
    verifier = scram_sha256_verifier("s3cret")
    secret = parse_scram_verifier(verifier)
    assert verifier.startswith("SCRAM-SHA-256$4096:")
    assert (secret.iterations, len(secret.salt), len(secret.stored_key), len(secret.server_key)) == (
        4096,
        16,
        32,
        32,
    )
    assert scram_sha256_verifier("s3cret") != verifier  # a fresh salt each time


@pytest.mark.parametrize(
    "password",
    [
        "s3cret",
        "do pw'x\"q",
        "pässwörd",
        "\ufb01 ligature",  # NFKC maps the ligature to "fi"
        "I\u00adX",  # soft hyphen is mapped to nothing
        "a\u2000b",  # a non-ASCII space becomes U+0020
        "\u0627\u0628",  # right-to-left only: prepared
        "a\u0627",  # mixed directions: prohibited, the raw password is used
        "ctl\u0080x",  # a prohibited control character: raw password
    ],
)
def test_the_verifier_matches_libpq(password: str) -> None:
    """libpq builds the verifier the server stores; with its salt we must get the same bytes."""
    conn = pq.PGconn.connect_start(b"host=/nonexistent port=1")  # encrypting needs no live server
    try:
        theirs = conn.encrypt_password(password.encode(), b"doadmin", b"scram-sha-256").decode()
    finally:
        conn.finish()
    secret = parse_scram_verifier(theirs)
    assert scram_sha256_verifier(password, secret.salt, secret.iterations) == theirs
    assert scram_verifier_matches(theirs, password)
    assert not scram_verifier_matches(theirs, password + "x")


def test_saslprep_leaves_ascii_alone() -> None:
    assert saslprep("plain ascii\x01") == "plain ascii\x01"
    assert saslprep("\ufb01") == "fi"


@pytest.mark.parametrize(
    "verifier",
    [
        "SCRAM-SHA-256$0:AAAA$AAAA:AAAA",
        "SCRAM-SHA-256$4096:AAAA$AAAA:AAAA",  # keys too short
        "SCRAM-SHA-256$4096:!!!$x:y",
        "scram-sha-256$4096:AAAA$AAAA:AAAA",
        "pencil",
    ],
)
def test_malformed_verifiers_are_refused(verifier: str) -> None:
    with pytest.raises(AuthFileError):
        parse_scram_verifier(verifier)


def test_it_renders_sorted_quoted_lines() -> None:
    scram = scram_sha256_verifier("pw", SALT)
    text = render_auth_file({"zed": scram, 'we"ird': "md5" + "0" * 32, "app": scram})
    assert text.splitlines() == [
        ";; Written by the control panel; edits here are overwritten.",
        f'"app" "{scram}"',
        f'"we""ird" "md5{"0" * 32}"',
        f'"zed" "{scram}"',
    ]
    assert parse_auth_file(text) == {"zed": scram, 'we"ird': "md5" + "0" * 32, "app": scram}


@pytest.mark.parametrize(
    ("secrets", "fragment"),
    [
        ({"app": "plain-text"}, "plain-text passwords are not written here"),
        ({"app": "md5" + "0" * 31}, "SCRAM-SHA-256 verifier or an md5 hash"),
        ({"app": scram_sha256_verifier("pw") + '\n"evil" "x"'}, "Role 'app'"),
        ({"ap\np": "md5" + "0" * 32}, "U+000A"),
        ({"nul\x00": "md5" + "0" * 32}, "U+0000"),
        ({"": "md5" + "0" * 32}, "must not be empty"),
        ({"r" * 64: "md5" + "0" * 32}, "longer than 63 bytes"),
    ],
)
def test_it_refuses_what_would_break_the_file(secrets: dict[str, str], fragment: str) -> None:
    with pytest.raises(AuthFileError, match=re.escape(fragment)):
        render_auth_file(secrets)


def test_a_broken_line_is_reported_on_reading() -> None:
    with pytest.raises(AuthFileError, match="Line 2"):
        parse_auth_file('"a" "b"\napp secret\n')
