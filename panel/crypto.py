"""Encryption at rest for role passwords (Fernet, key kept outside the database)."""

from __future__ import annotations

import secrets
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@lru_cache(maxsize=1)
def _fernet() -> Fernet:
    return Fernet(settings.PANEL_ENCRYPTION_KEY.encode())


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def new_encrypted_secret() -> str:
    """A fresh random password, encrypted (a field's default: each row its own)."""
    return encrypt(secrets.token_urlsafe(32))


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise ValueError("A stored password cannot be decrypted: the encryption key has changed.") from None
