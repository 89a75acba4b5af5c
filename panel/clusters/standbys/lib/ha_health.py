"""Whether a cluster with standbys is online or degraded, from what Patroni says of its members.

Online: one member is the running primary (it accepts writes) and every other one streams within
``LAG_BOUND_BYTES`` of it. A member that is not running or streaming counts as missing only once it
has been so for ``GRACE`` (a switchover, a rolling restart or Patroni's own restart stops a member
for a few seconds: that is no fault). Pure: the services and the pages give it the members.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from panel.core.errors import N_, Message

# Longer than a switchover or a member's restart on a loaded machine takes.
GRACE = dt.timedelta(seconds=60)
# A standby this far behind would lose that much if it had to take over.
LAG_BOUND_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class MemberView:
    name: str
    is_primary: bool
    state: str
    lag_bytes: int | None
    healthy_at: dt.datetime | None  # when it was last seen running or streaming


@dataclass(frozen=True)
class Problem:
    member: str
    kind: str  # "missing" or "lagging"
    lag_bytes: int | None = None


def problems(members: Iterable[MemberView], now: dt.datetime) -> list[Problem]:
    """What keeps the cluster from being online: members missing past the grace, standbys lagging
    past the bound, and a primary missing (named by the empty member) when none runs."""
    members = list(members)
    found: list[Problem] = []
    leader = any(m.is_primary and m.state == "running" for m in members)
    for m in members:
        if (m.is_primary and m.state == "running") or (not m.is_primary and m.state == "streaming"):
            if not m.is_primary and m.lag_bytes is not None and m.lag_bytes > LAG_BOUND_BYTES:
                found.append(Problem(m.name, "lagging", m.lag_bytes))
            continue
        if m.healthy_at is None or now - m.healthy_at > GRACE:
            found.append(Problem(m.name, "missing"))
    if not leader:
        last = max((m.healthy_at for m in members if m.healthy_at is not None), default=None)
        if last is None or now - last > GRACE:
            found.append(Problem("", "no-primary"))
    return found


def describe(found: list[Problem]) -> Message | None:
    """Which member is missing or lagging, as a sentence rendered where it is read."""
    if not found:
        return None
    if any(p.kind == "no-primary" for p in found):
        return Message(
            N_("No member is the primary: the cluster does not accept writes."), "cluster.no_primary"
        )
    missing = ", ".join(p.member for p in found if p.kind == "missing")
    lagging = ", ".join(p.member for p in found if p.kind == "lagging")
    if missing and lagging:
        return Message(
            N_("Not running or not streaming: %(missing)s. Lagging behind the primary: %(lagging)s."),
            "cluster.members_missing_lagging",
            missing=missing,
            lagging=lagging,
        )
    if missing:
        return Message(
            N_("Not running or not streaming: %(members)s."), "cluster.members_missing", members=missing
        )
    return Message(
        N_("Lagging behind the primary by more than %(mb)s MB: %(members)s."),
        "cluster.members_lagging",
        mb=LAG_BOUND_BYTES // (1024 * 1024),
        members=lagging,
    )
