"""What a measurement could not see, said in coded words: the database (or the whole cluster)
and a reason code, never the driver's text, which names the server's socket path and is in
English (it goes to the log). Kept on ``Storage.blind`` as JSON, rendered where it is read."""

from __future__ import annotations

import json
from typing import Any

from panel.core.errors import N_, Message, Term

CONNECTION_LIMIT = "connection-limit"
LOCKED = "locked"
NO_ACCESS = "no-access"
UNREACHABLE = "unreachable"

REASONS = {
    CONNECTION_LIMIT: N_("it accepts no more connections"),
    LOCKED: N_("a lock held the measurement up"),
    NO_ACCESS: N_("the panel's monitoring role may not connect to it"),
    UNREACHABLE: N_("the server did not answer"),
}


def reason_code(sqlstate: str | None, text: str) -> str:
    """The reason code of a refusal: by its SQLSTATE, or by libpq's words for a connection refused
    before one was sent."""
    lowered = text.lower()
    if sqlstate in {"53300"} or "too many connections" in lowered or "connection slots" in lowered:
        return CONNECTION_LIMIT
    if sqlstate in {"55P03", "57014"} or "lock timeout" in lowered:
        return LOCKED
    if sqlstate in {"42501", "28000", "28P01"} or "permission denied" in lowered:
        return NO_ACCESS
    return UNREACHABLE


def dumps(blind: dict[str, str]) -> str:
    """``{database: code}`` (``""``: the whole cluster) as stored; empty when nothing was blind."""
    return json.dumps(sorted(blind.items()), ensure_ascii=False) if blind else ""


def loads(stored: str) -> list[tuple[str, str]]:
    """The stored pairs; a text from before this format counts as the whole cluster, unreachable."""
    if not stored:
        return []
    try:
        pairs = json.loads(stored)
        return [(str(name), str(code)) for name, code in pairs]
    except (ValueError, TypeError):
        return [("", UNREACHABLE)]


def shown(stored: str, cluster_name: str) -> Message | None:
    """What was not measured and why, as one sentence part in the reader's language."""
    pairs = loads(stored)
    if not pairs:
        return None
    parts = [
        Message(
            N_("%(what)s (%(why)s)"),
            what=name or cluster_name,
            why=Term(REASONS.get(code, REASONS[UNREACHABLE])),
        )
        for name, code in pairs
    ]
    # One part after another, each rendered in the reader's language (the joint is no word).
    joined = "; ".join(f"%(p{i})s" for i in range(len(parts)))
    params: dict[str, Any] = {f"p{i}": part for i, part in enumerate(parts)}
    return Message(joined, **params)
