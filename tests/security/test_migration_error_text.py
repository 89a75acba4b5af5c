"""A failed online migration showed the user PostgreSQL's own words: ``run_migration`` stored
``str(exc)`` of a DatabaseError as the migration's error and the cluster's event, and libpq's
words can name files of the panel's machine. Replayed for real: the tenant's source stops
accepting its user once its tables are published (here when the panel writes the source's
password file, the moment just before it subscribes), so the cluster's CREATE SUBSCRIPTION fails
and libpq adds ``password retrieved from file "<the cluster's data root>/….pgpass"``.

The status of a running migration did the same (``migration_status``): with the cluster's
server down it showed ``connection to server on socket "<the cluster's socket directory>/…"``.

Now the user reads a plain reason and the panel's log keeps the detail. The legitimate migration
beside it is test_migration_pydo.py's; here, beside each, the detail still reaches the log and
the status reads again once the server is back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from psycopg import sql

from panel.clusters.engine import isolation, postgres
from panel.clusters.models import Cluster
from panel.core.errors import Message
from panel.migrate.models import MigrationStatus
from panel.migrate.services import actions, cutover, target
from panel.migrate.tests import conftest as sources
from panel.migrate.tests.conftest import SOURCE_PASSWORD, Source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(scope="module")
def logical_source() -> Iterator[Source]:
    """The tenant's source: wal_level = logical, a ``shop`` database with tables."""
    yield from sources._server("wal_level = logical\n", "pgpanel-migsrc-err-")


@pytest.fixture
def source_changes_password(logical_source: Source, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The source refuses its user from the moment the panel writes its password file; the
    password and the source's publications are put back afterwards."""
    written: list[Path] = []
    real = target.write_passfile

    def write_then_change(cluster: Cluster, name: str, password: str) -> Path:
        path = real(cluster, name, password)
        written.append(path)
        with logical_source.connect() as conn:
            conn.execute("ALTER ROLE srcadmin PASSWORD 'changed-by-the-source'")
        return path

    monkeypatch.setattr(target, "write_passfile", write_then_change)
    try:
        yield written
    finally:
        with logical_source.connect() as conn:
            conn.execute(sql.SQL("ALTER ROLE srcadmin PASSWORD {}").format(sql.Literal(SOURCE_PASSWORD)))
        with logical_source.connect("shop") as conn:
            for (name,) in conn.execute("SELECT pubname FROM pg_publication").fetchall():
                conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))


def test_a_database_error_reaches_the_user_as_a_plain_reason_and_the_log_in_full(
    local_cluster: Cluster,
    logical_source: Source,
    source_changes_password: list[Path],
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    migration = logical_source.migrate_into(local_cluster)
    with caplog.at_level(logging.WARNING, logger="panel.migrate.services.actions"):
        actions.run_migration(str(migration.pk))
    (passfile,) = source_changes_password

    migration.refresh_from_db()
    assert migration.status == MigrationStatus.ERROR
    event = local_cluster.events.get(kind="migration-failed")
    shown = [migration.error_message, event.message, str(event.shown)]
    for text in shown:
        # Before: 'could not connect to the publisher: … password retrieved from file "/…"'.
        assert str(passfile) not in text and str(local_cluster.data_root) not in text, text
        assert "password authentication failed" not in text, text
    assert migration.error_message == str(Message(actions.STATEMENT_FAILED))
    # Beside it: the operator still finds PostgreSQL's own words in the panel's log.
    assert "password authentication failed" in caplog.text and str(passfile) in caplog.text, caplog.text


def test_a_running_migrations_state_hides_the_clusters_socket_when_the_server_is_down(
    local_cluster: Cluster,
    logical_source: Source,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    migration = logical_source.migrate_into(local_cluster)
    actions.run_migration(str(migration.pk))
    migration.refresh_from_db()
    assert migration.status == MigrationStatus.RUNNING and migration.subscriptions, migration.error_message

    cluster, user = local_cluster, isolation.os_user(local_cluster)
    postgres.stop(cluster.version, cluster.pgdata, user=user, timeout=30)
    try:
        with caplog.at_level(logging.WARNING, logger="panel.migrate.services.cutover"):
            state = cutover.migration_status(cluster)
        assert state is not None
        # Before: 'connection to server on socket "/…/.s.PGSQL.<port>" failed: …'.
        assert str(cluster.socket_dir) not in state.message and ".s.PGSQL" not in state.message, state.message
        assert state.message == str(Message(cutover.STATE_UNREADABLE))
        assert str(cluster.socket_dir) in caplog.text, caplog.text
    finally:
        postgres.start(cluster.version, cluster.pgdata, cluster.log_file, user=user,
                       timeout=django_settings.PANEL_COMMAND_TIMEOUT)  # fmt: skip
    # Beside it: with the server back, the state reads as before.
    state = cutover.migration_status(cluster)
    assert state is not None and state.message != str(Message(cutover.STATE_UNREADABLE)), state
    assert [db.name for db in state.databases] == ["shop"]
