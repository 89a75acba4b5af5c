"""A migration whose schema copy fails (issue 38): pg_restore's words are about the user's own
objects ("relation … already exists") and stay the migration's error and the event's reason, but
without a path of the panel's machines (a socket directory), which only the log keeps. Replayed on
a real cluster whose database already holds the source's table; beside it, the same migration
once the table is gone goes through to its subscriptions and is stopped."""

from __future__ import annotations

from typing import Any

import pytest

from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.tests.conftest import connect_as_client
from panel.migrate.models import MigrationStatus
from panel.migrate.services import actions, cutover
from panel.migrate.tests.conftest import Source

pytestmark = pytest.mark.integration


def test_a_schema_copy_that_fails_says_why_without_a_path(
    shared_local_cluster: Cluster, logical_source: Source, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    cluster = shared_local_cluster
    roles.add_database(cluster, "shop")
    try:
        with connect_as_client(cluster, dbname="shop", autocommit=True) as conn:
            conn.execute("CREATE TABLE public.items (id int)")  # the source's table, already here
        migration = logical_source.migrate_into(cluster)
        actions.run_migration(str(migration.pk))
        migration.refresh_from_db()
        assert migration.status == MigrationStatus.ERROR
        event = cluster.events.filter(kind="migration-failed").latest("id")
        for shown in (migration.error_message, event.shown):
            assert 'relation "items" already exists' in shown, shown
            assert ".s.PGSQL" not in shown and str(cluster.data_root) not in shown, shown
        assert 'relation "items" already exists' in caplog.text  # for an administrator

        # Beside it: the table gone, the same migration copies the schema and subscribes.
        with connect_as_client(cluster, dbname="shop", autocommit=True) as conn:
            conn.execute("DROP TABLE public.items")
        migration = logical_source.migrate_into(cluster)
        actions.run_migration(str(migration.pk))
        migration.refresh_from_db()
        assert migration.status in (MigrationStatus.RUNNING, MigrationStatus.SYNCING), migration.error_message
        assert migration.subscriptions == {"shop": f"{migration.name}_0"}
        cutover.stop_migration(cluster, str(migration.pk))
    finally:
        roles.delete_database(cluster, "shop")
