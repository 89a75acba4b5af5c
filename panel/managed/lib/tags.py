"""Tag names as the managed service accepts them (pure)."""

from __future__ import annotations

import re

TAG = re.compile(r"[A-Za-z0-9:_.-]{1,255}")
MAX_TAGS = 50


def bad_tags(names: list[str]) -> list[str]:
    """The names that are not tags: 1–255 letters, digits, ``:``, ``-``, ``_`` or ``.``."""
    return [name for name in names if not TAG.fullmatch(name)]
