"""Which walsenders the replication-lag chart draws, and under which name (pure)."""

from __future__ import annotations

from panel.insights.lib import metrics


def test_replication_lag_is_labelled_by_member_or_replica_and_nothing_else():
    replicas = {"pgpanel_replica_ab12": "reports"}
    assert metrics.replication_label("member-2", {"member-1", "member-2"}, replicas) == "member=member-2"
    assert metrics.replication_label("pgpanel_replica_ab12", set(), replicas) == "member=replica:reports"
    assert metrics.replication_label("pg_basebackup", {"member-2"}, replicas) is None
    assert metrics.CATALOGUE["replication_lag_bytes"].unit == "B"
