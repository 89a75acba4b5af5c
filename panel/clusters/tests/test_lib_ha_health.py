"""The rule that says whether a cluster with standbys is online (standbys/lib/ha_health.py)."""

from __future__ import annotations

import datetime as dt

from panel.clusters.standbys.lib.ha_health import GRACE, LAG_BOUND_BYTES, MemberView, describe, problems

NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
PRIMARY = MemberView("member-2", True, "running", 0, NOW)


def test_a_running_primary_and_streaming_standbys_are_online() -> None:
    assert problems([PRIMARY, MemberView("member-1", False, "streaming", 0, NOW)], NOW) == []


def test_a_member_stopped_for_a_switchover_is_no_fault_within_the_grace() -> None:
    stopped = MemberView("member-1", False, "stopped", None, NOW - GRACE / 2)
    assert problems([PRIMARY, stopped], NOW) == []
    # A moment with no primary at all (the handover itself) is no fault either.
    assert problems([MemberView("member-2", False, "starting", None, NOW - GRACE / 2), stopped], NOW) == []


def test_a_member_missing_past_the_grace_or_lagging_past_the_bound_is_named() -> None:
    gone = MemberView("member-1", False, "stopped", None, NOW - GRACE * 2)
    behind = MemberView("member-3", False, "streaming", LAG_BOUND_BYTES + 1, NOW)
    found = problems([PRIMARY, gone, behind], NOW)
    assert [(p.member, p.kind) for p in found] == [("member-1", "missing"), ("member-3", "lagging")]
    assert "member-1" in str(describe(found)) and "member-3" in str(describe(found))


def test_no_primary_past_the_grace_is_said() -> None:
    found = problems([MemberView("member-1", False, "stopped", None, NOW - GRACE * 2)], NOW)
    assert describe(found) is not None and describe(found).code == "cluster.no_primary"
