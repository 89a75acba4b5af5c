"""The filesystem-quota model applied to databases (pure, no Django): sizes and counts as
``setquota`` takes them, the soft/hard/grace state machine, and ``repquota``'s report layout.

Space is in bytes throughout; the report shows it as ``repquota -s`` does (kibibytes, or M/G/T
once a value reaches 100 of that unit, rounded up); relations stand for files (k/m/g/t, powers
of 1000, as quota-tools' number2str). A limit of 0 means no limit, as with setquota."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from panel.core.errors import C_, N_, CodedError

DEFAULT_GRACE_SECONDS = 7 * 24 * 3600  # quota-tools' default: 7 days for blocks and for inodes

_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
_COUNT = re.compile(r"\s*(\d+)\s*([kmgt]?)\s*", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_COUNT_UNITS = {"": 1, "K": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}
MAX_BYTES = 2**63 - 1


class QuotaInputError(CodedError, ValueError):
    """A size, count or limit pair that cannot be used; the message says what was meant (a
    template and its parameters, rendered in the reader's language)."""

    def __init__(self, message: str, code: str, **params: object) -> None:
        super().__init__(message, code=code, params=params)


def _parse_amount(
    text: str | int,
    pattern: re.Pattern[str],
    units: dict[str, int],
    code: str,
    *,
    unreadable: str,
    negative: str,
) -> int:
    """``text`` as a whole number with an optional unit of ``units``; the refusals name it so."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = pattern.fullmatch(str(text))
        if not match:
            raise QuotaInputError(unreadable, code, text=text)
        value = int(match.group(1)) * units[match.group(2).upper()]
    if value < 0:
        raise QuotaInputError(negative, code)
    if value > MAX_BYTES:
        raise QuotaInputError(N_("“%(text)s” is too large."), code, text=text)
    return value


def parse_size(text: str | int) -> int:
    """Bytes from ``100M``, ``2G``, ``512K``, ``1T`` or plain bytes (binary units)."""
    return _parse_amount(
        text,
        _SIZE,
        _SIZE_UNITS,
        "quota.bad_size",
        unreadable=N_(
            "“%(text)s” is not a size: give bytes, or a whole number with K, M, G or T (e.g. 100M, 2G)."
        ),
        negative=N_("A size cannot be negative (0 means no limit)."),
    )


def parse_count(text: str | int) -> int:
    """A relation count from ``500``, ``10k`` or ``2m`` (powers of 1000, as setquota's inodes)."""
    return _parse_amount(
        text,
        _COUNT,
        _COUNT_UNITS,
        "quota.bad_count",
        unreadable=N_("“%(text)s” is not a number of relations: give a whole number (e.g. 500, 10k)."),
        negative=N_("A number of relations cannot be negative (0 means no limit)."),
    )


_WHAT = {"space": C_("quota", "space"), "relations": C_("quota", "relations")}


def check_limits(soft: int, hard: int, *, what: str = "space") -> None:
    """A soft limit above a hard one could never act: refused (0 = no limit on either side)."""
    if soft < 0 or hard < 0:
        raise QuotaInputError(
            N_("The %(what)s limits cannot be negative."), "quota.negative", what=_WHAT[what]
        )
    if soft and hard and soft > hard:
        raise QuotaInputError(
            N_("The soft %(what)s limit is above the hard one; make it equal or lower."),
            "quota.soft_above_hard",
            what=_WHAT[what],
        )


def human_space(num_bytes: int) -> str:
    """As ``repquota -s``: kibibytes (rounded up), or M, G, T from 100 of that unit on."""
    sign = "-" if num_bytes < 0 else ""
    kib = (abs(num_bytes) + 1023) // 1024
    for power, suffix in ((3, "T"), (2, "G"), (1, "M")):
        unit = 1024**power
        if kib >= 100 * unit:
            return f"{sign}{(kib + unit - 1) // unit}{suffix}"
    return f"{sign}{kib}K"


def human_count(number: int, whole: Callable[[int], str] = str) -> str:
    """As quota-tools' number2str with ``-s``: k, m, g, t (powers of 1000) from 100 of them on;
    below that the number as ``whole`` writes it (a page passes its number formatter: 99,999)."""
    for power, suffix in ((4, "t"), (3, "g"), (2, "m"), (1, "k")):
        unit = 1000**power
        if number >= 100 * unit:
            return f"{(number + unit - 1) // unit}{suffix}"
    return whole(number)


def grace_left_text(seconds: float) -> str:
    """The grace column while it runs, as repquota rounds it: ``6days`` from two days on, else
    ``hh:mm``; ``none`` once it ran out."""
    if seconds <= 0:
        return "none"
    minutes = (int(seconds) + 30) // 60
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days >= 2:
        return f"{days}days"
    return f"{hours + days * 24:02d}:{minutes:02d}"


def grace_period_text(seconds: int) -> str:
    """A grace period for the header (``7days``; shorter ones as hh:mm)."""
    return grace_left_text(seconds) if seconds > 0 else "0:00"


class State(enum.StrEnum):
    OK = "ok"
    OVER_SOFT = "over_soft"  # past the soft limit, the grace period running
    ENFORCED = "enforced"  # grace over, or the hard limit reached: writes stopped


@dataclass(frozen=True)
class Limit:
    """One dimension of a quota (space in bytes, or relations): usage against soft and hard."""

    used: int
    soft: int = 0
    hard: int = 0

    @property
    def over_soft(self) -> bool:
        return bool(self.soft) and self.used > self.soft

    @property
    def over_hard(self) -> bool:
        # As the kernel: the hard limit is the most one may use; reaching it stops the next write.
        return bool(self.hard) and self.used >= self.hard

    @property
    def over(self) -> bool:
        return self.over_soft or self.over_hard


@dataclass(frozen=True)
class Verdict:
    state: State
    over_since: float | None  # when the soft limit was first passed (a Unix time), None when under
    reason: str  # which limit acts, for the message and the event ("" when ok)


def judge(
    space: Limit, files: Limit, *, over_since: float | None, now: float, space_grace: int, files_grace: int
) -> Verdict:
    """The next state from the usage, when the soft limit was first passed and the clock.

    Back under every soft limit → ok (the grace period starts afresh next time); a hard limit
    reached → enforced at once; over a soft limit → over_soft until its grace runs out, then
    enforced."""
    if not space.over and not files.over:
        return Verdict(State.OK, None, "")
    since = over_since if over_since is not None else now
    if space.over_hard:
        return Verdict(State.ENFORCED, since, "space hard limit")
    if files.over_hard:
        return Verdict(State.ENFORCED, since, "relations hard limit")
    if space.over_soft and now - since >= space_grace:
        return Verdict(State.ENFORCED, since, "space soft limit, grace period over")
    if files.over_soft and now - since >= files_grace:
        return Verdict(State.ENFORCED, since, "relations soft limit, grace period over")
    return Verdict(State.OVER_SOFT, since, "space soft limit" if space.over_soft else "relations soft limit")


def watermark(full: bool, percent: float, *, high: float, low: float) -> bool | None:
    """A disk's fullness with two marks, so that it does not flap: full from ``high`` on, not
    full again under ``low``. The new fullness when it changes, None when it stays."""
    if not full and percent >= high:
        return True
    if full and percent < low:
        return False
    return None


def flags(space: Limit, files: Limit) -> str:
    """repquota's two-character column: ``+`` where usage is over that dimension's limit."""
    return ("+" if space.over else "-") + ("+" if files.over else "-")


@dataclass(frozen=True)
class ReportRow:
    """One line of the report: a database or a role, its usage and limits."""

    name: str
    space: Limit
    files: Limit
    over_since: float | None = None


def grace_column(limit: Limit, over_since: float | None, grace: int, now: float) -> str:
    if not limit.over_soft or over_since is None:
        return ""
    return grace_left_text(over_since + grace - now)


def render_report(
    rows: Iterable[ReportRow],
    *,
    title: str,
    kind: str,
    space_grace: int,
    files_grace: int,
    now: float,
    human: bool = True,
) -> str:
    """The report in ``repquota -s`` layout (``human`` False: space in KiB, counts as they are)."""

    def space_text(value: int) -> str:
        return human_space(value) if human else str((value + 1023) // 1024)

    def count_text(value: int) -> str:
        return human_count(value) if human else str(value)

    lines = [
        f"*** Report for {kind} quotas on {title}",
        f"Block grace time: {grace_period_text(space_grace)}; Inode grace time: {grace_period_text(files_grace)}",
        "                        Space limits                File limits",
        f"{kind.capitalize():<15} used    soft    hard  grace    used  soft  hard  grace",
        "-" * 70,
    ]
    for row in rows:
        lines.append(
            f"{row.name:<10} {flags(row.space, row.files)} {space_text(row.space.used):>7} "
            f"{space_text(row.space.soft):>7} {space_text(row.space.hard):>7} "
            f"{grace_column(row.space, row.over_since, space_grace, now):>6} "
            f"{count_text(row.files.used):>7} {count_text(row.files.soft):>5} {count_text(row.files.hard):>5} "
            f"{grace_column(row.files, row.over_since, files_grace, now):>6}".rstrip()
        )
    return "\n".join(lines) + "\n"
