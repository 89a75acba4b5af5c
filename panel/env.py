"""Typed readers for settings taken from environment variables.

Each helper fails loudly (ImproperlyConfigured) on a value it cannot use, so a typo in the
environment stops the panel at start instead of surfacing later as odd behaviour.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str) -> str:
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def env_positive(name: str, default: float) -> float:
    """A number above zero (``0.5`` or ``2``); zero, a negative, ``nan`` or ``inf`` is refused."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ImproperlyConfigured(f"{name} must be a positive number, got {raw!r}")
    return value


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_port_range(name: str, default: tuple[int, int]) -> tuple[int, int]:
    """A range written ``FIRST-LAST`` (inclusive); it must hold at least one server+pooler pair."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        first_s, last_s = raw.split("-", 1)
        first, last = int(first_s), int(last_s)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must look like 25060-25199, got {raw!r}") from None
    if not (1024 <= first < last <= 65535):
        raise ImproperlyConfigured(
            f"{name} must be two ports between 1024 and 65535, first below last, got {raw!r}"
        )
    return first, last


def secret_from_file(path: Path, generate: Callable[[], str]) -> str:
    """Read a secret kept in ``path``; create it (0600) on first start."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    value = generate()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value


def new_django_secret() -> str:
    return secrets.token_urlsafe(50)
