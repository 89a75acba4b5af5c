"""Sources to migrate from: throwaway PostgreSQL servers on loopback (tests/pgserver.py), one with
wal_level = logical holding a ``shop`` database, one without."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
import pytest

from tests import pgserver

if TYPE_CHECKING:
    from panel.clusters.models import Cluster
    from panel.migrate.models import OnlineMigration

SOURCE_PASSWORD = "src-pass:with\\odd'chars"
READER_PASSWORD = "reader-password-1"
HBA = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"


@dataclass(frozen=True)
class Source:
    port: int
    socket_dir: str

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        return psycopg.connect(
            host=self.socket_dir, port=self.port, user="srcadmin", dbname=dbname, autocommit=True
        )

    def migrate_into(self, cluster: Cluster, ignore: Sequence[str] = ("scratch",)) -> OnlineMigration:
        """An online migration of this server into ``cluster`` (started, not run), as srcadmin
        over loopback without TLS, leaving ``ignore`` out."""
        from panel.migrate.services import actions

        return actions.start_migration(
            cluster, host="127.0.0.1", port=self.port, dbname="postgres", username="srcadmin",
            password=SOURCE_PASSWORD, disable_ssl=True, ignore_dbs=list(ignore), enqueue=False,
        )  # fmt: skip


def run_until_syncing(
    cluster: Cluster, migration: OnlineMigration, wait_until: Callable[..., object]
) -> None:
    """Run a started migration (schema copy, subscriptions) and wait until it says it is syncing."""
    from panel.migrate.models import MigrationStatus
    from panel.migrate.services import actions, cutover

    actions.run_migration(str(migration.pk))
    migration.refresh_from_db()
    assert migration.status == MigrationStatus.RUNNING, migration.error_message

    def synced() -> bool:
        state = cutover.migration_status(cluster)
        assert state is not None and state.status in ("running", "syncing"), state
        return state.status == "syncing"

    wait_until(synced, timeout=120, message="the migration reaches syncing")


def _server(settings_text: str, prefix: str) -> Iterator[Source]:
    from django.conf import settings

    with pgserver.throwaway_server(
        port=pgserver.free_port_outside(*settings.PANEL_PORT_RANGE),
        listen_addresses="127.0.0.1",
        pg_hba=HBA,
        superuser="srcadmin",
        password=SOURCE_PASSWORD,
        settings=settings_text,
        run_as=getattr(settings, "PANEL_RUN_AS_USER", "postgres"),
        prefix=prefix,
    ) as pg:
        source = Source(port=pg.port, socket_dir=pg.socket_dir)
        with source.connect() as conn:
            conn.execute(f"CREATE ROLE reader LOGIN PASSWORD '{READER_PASSWORD}'")
            conn.execute("CREATE DATABASE shop")
            conn.execute("CREATE DATABASE scratch")
        with source.connect("shop") as conn:
            conn.execute(
                "CREATE TABLE items (id bigserial PRIMARY KEY, note text NOT NULL, at timestamptz DEFAULT now())"
            )
            conn.execute("CREATE TABLE audit (who text, superuser bool)")
            conn.execute("INSERT INTO items (note) SELECT 'before ' || g FROM generate_series(1, 500) g")
            conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
        yield source


@pytest.fixture(scope="module")
def logical_source() -> Iterator[Source]:
    yield from _server("wal_level = logical\n", "pgpanel-migsrc-")


@pytest.fixture(scope="module")
def replica_source() -> Iterator[Source]:
    yield from _server("wal_level = replica\n", "pgpanel-migsrc-plain-")
