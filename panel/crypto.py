"""Encryption at rest for role passwords (Fernet, key kept outside the database)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from functools import lru_cache
from typing import Any, overload

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


class Encrypted(property):
    """A model's secret kept encrypted at rest in its text field ``column``: reading the attribute
    decrypts it, setting it stores the new ciphertext (``user.password = new_password()``). A
    property, so a model's constructor takes it by name as it takes any property. ``blank``: an
    empty column (a row made before it had a secret) reads as ""."""

    def __init__(self, column: str, *, blank: bool = False) -> None:
        def read(row: Any) -> str:
            token = getattr(row, column)
            return "" if blank and not token else decrypt(token)

        def write(row: Any, value: str) -> None:
            setattr(row, column, encrypt(value))

        super().__init__(read, write)

    @overload
    def __get__(self, row: None, owner: type | None = None, /) -> Encrypted: ...
    @overload
    def __get__(self, row: object, owner: type | None = None, /) -> str: ...
    def __get__(self, row: object, owner: type | None = None, /) -> Any:
        return super().__get__(row, owner)


def derived_secret(purpose: str) -> str:
    """A password that every node computes alike from the encryption key and ``purpose``, and
    that tells nothing of the key or of any other purpose's (HMAC-SHA256): the etcd users' and the
    members' role, passwords the panel never has to store."""
    key = settings.PANEL_ENCRYPTION_KEY.encode()
    return hmac.new(key, f"pgpanel {purpose}".encode(), hashlib.sha256).hexdigest()
