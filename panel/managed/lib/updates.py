"""Versions and windows, pure: what a program's ``--version`` says, whether an installed minor is
newer than the running one, whether a moment falls in a weekly maintenance window."""

from __future__ import annotations

import datetime as dt
import re

from panel.core.errors import N_, Term

DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# The days' names as a sentence says them, translated where it is read ("Mittwoch", never "wednesday").
DAY_NAMES = dict(
    zip(
        DAYS,
        (
            N_("Monday"),
            N_("Tuesday"),
            N_("Wednesday"),
            N_("Thursday"),
            N_("Friday"),
            N_("Saturday"),
            N_("Sunday"),
        ),
        strict=True,
    )
)


def day_name(day: str) -> Term | str:
    """``day`` (``wednesday``) as a word to translate in a message; an unknown one as it is."""
    return Term(DAY_NAMES[day]) if day in DAY_NAMES else day


_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


def parse_version(text: str) -> str:
    """The first dotted number of a ``--version`` line or a ``server_version``:
    ``postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`` → ``15.18``, ``PgBouncer 1.18.0`` →
    ``1.18.0``; empty when there is none."""
    found = _VERSION.search(text or "")
    return found.group(1) if found else ""


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def newer(installed: str, running: str) -> bool:
    """An update is pending when both are known and the installed one is the newer release of
    the same major (PostgreSQL's major is its first number; a new major is an upgrade, not an
    update)."""
    if not installed or not running:
        return False
    new, old = version_key(installed), version_key(running)
    return bool(new and old) and new[0] == old[0] and new > old


def in_window(now: dt.datetime, day: str, hour: int) -> bool:
    """``now`` (UTC) is inside the hour that starts at ``hour``:00 on ``day``."""
    now = now.astimezone(dt.UTC)
    return DAYS[now.weekday()] == day and now.hour == hour


def parse_hour(value: str) -> int | None:
    """The managed service's ``hour``: ``"14:00"``, ``"14:00:00"`` or ``"14"`` → 14; None when it is
    not a whole hour of the day."""
    match = re.fullmatch(r"(\d{1,2})(?::00(?::00)?)?", value.strip())
    if not match:
        return None
    hour = int(match.group(1))
    return hour if 0 <= hour <= 23 else None
