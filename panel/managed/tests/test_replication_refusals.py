"""Granting logical replication when the server refuses (issue 38): the refusal is the panel's
sentence with the user's name, in the reader's language; PostgreSQL's English words are the log's.
Replayed on a real cluster whose role was dropped behind the panel's back."""

from __future__ import annotations

import pytest
from django.utils import translation

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.core.errors import ServiceError
from panel.managed.models import ReplicationUser
from panel.managed.services import logical_replication

pytestmark = pytest.mark.integration


def _on_server(cluster: Cluster, statement: str) -> None:
    with dbconn.admin_connection(cluster) as conn:
        conn.execute(statement)


def test_a_role_gone_from_the_server_is_refused_in_words_and_nothing_granted(
    shared_local_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = shared_local_cluster
    roles.add_user(cluster, "cdc_gone")
    roles.add_user(cluster, "cdc_kept")
    try:
        _on_server(cluster, 'DROP ROLE "cdc_gone"')
        with pytest.raises(ServiceError) as refused:
            logical_replication.set_replication(cluster, "cdc_gone", True)
        assert refused.value.code == "cluster.server_object_missing"
        assert refused.value.message == (
            "The server has no user named “cdc_gone” any more (it was removed outside the panel)."
        )
        assert "does not exist" not in refused.value.message
        with translation.override("de"):
            assert "„cdc_gone“" in refused.value.message and "Server" in refused.value.message
        assert 'role "cdc_gone" does not exist' in caplog.text
        assert not ReplicationUser.objects.filter(user__name="cdc_gone").exists()

        # Beside it: a user the server has is granted replication, and it is taken back.
        assert logical_replication.set_replication(cluster, "cdc_kept", True) is True
        with dbconn.admin_connection(cluster) as conn:
            row = conn.execute("SELECT rolreplication FROM pg_roles WHERE rolname = 'cdc_kept'").fetchone()
        assert row == (True,)
        assert logical_replication.set_replication(cluster, "cdc_kept", False) is False
    finally:
        # Back on the server for the panel's delete to drop it again.
        _on_server(
            cluster,
            "DO $$ BEGIN CREATE ROLE cdc_gone LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        )
        roles.delete_user(cluster, "cdc_gone")
        roles.delete_user(cluster, "cdc_kept")
