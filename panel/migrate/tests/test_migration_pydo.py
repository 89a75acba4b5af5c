"""An online migration driven by the managed service's client, pydo 0.44 unchanged, through the
live server and a real Celery worker: a source with wal_level = logical is copied while a writer
inserts into it, its status read until it syncs, then cut over; the rows are equal afterwards, the
sequences follow, and the replication objects are gone on both sides. A tenant's trigger marked
ENABLE ALWAYS runs during the migration, and never with a superuser's rights."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable

import psycopg
import pytest
from django.core.management import call_command
from django.test import Client as WebClient

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster
from panel.clusters.services import delete_cluster
from panel.clusters.tests.conftest import connect_as_client
from panel.migrate.models import OnlineMigration
from panel.migrate.tests.conftest import SOURCE_PASSWORD, Source
from tests.fixtures.pydo import owner_client

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

AUDIT_TRIGGER = """
CREATE FUNCTION public.audit_it() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.audit SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
  RETURN NEW;
END $$;
CREATE TRIGGER audit_it AFTER INSERT ON public.items FOR EACH ROW EXECUTE FUNCTION public.audit_it();
ALTER TABLE public.items ENABLE ALWAYS TRIGGER audit_it;
"""


class Writer(threading.Thread):
    """Inserts into the source's ``shop.items`` until stopped."""

    def __init__(self, source: Source) -> None:
        super().__init__(daemon=True)
        self.source = source
        self.halt = threading.Event()
        self.written = 0

    def run(self) -> None:
        with self.source.connect("shop") as conn:
            while not self.halt.is_set():
                conn.execute("INSERT INTO items (note) VALUES ('during ' || %s)", (self.written,))
                self.written += 1
                time.sleep(0.005)


def rows(conn: psycopg.Connection) -> list[tuple[int, str]]:
    return conn.execute("SELECT id, note FROM items ORDER BY id").fetchall()


def test_pydo_migrates_a_source_while_it_is_written_and_cuts_over(
    live_server: object,
    local_cluster: Cluster,
    logical_source: Source,
    celery_worker: None,
    settings: object,
    wait_until: Callable[..., object],
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]  # type: ignore[attr-defined]
    client = owner_client(live_server.url, local_cluster.owner)  # type: ignore[attr-defined]
    uuid = str(local_cluster.pk)
    assert client.databases.get_migration_status(uuid)["id"] == "not_found"

    writer = Writer(logical_source)
    writer.start()
    body = {
        "source": {"host": "127.0.0.1", "port": logical_source.port, "dbname": "postgres",
                   "username": "srcadmin", "password": SOURCE_PASSWORD},
        "disable_ssl": True,
        "ignore_dbs": ["scratch"],
    }  # fmt: skip
    try:
        started = client.databases.update_online_migration(uuid, body)
        assert started["status"] == "running" and started["id"]
        stored = OnlineMigration.objects.get(pk=started["id"])
        assert stored.databases == ["shop"]
        assert SOURCE_PASSWORD not in stored.password_encrypted and stored.password == SOURCE_PASSWORD

        def syncing() -> dict | None:
            status = client.databases.get_migration_status(uuid)
            assert status["status"] in ("running", "syncing"), status
            return status if status["status"] == "syncing" else None

        status = wait_until(syncing, timeout=120, message="the migration reaches syncing")
        (shop,) = status["databases"]  # type: ignore[index]
        assert shop["name"] == "shop" and shop["tables"] == shop["tables_ready"] == 2

        # The tenant marks a trigger ALWAYS: it fires for replicated rows, as the migration's role.
        with connect_as_client(local_cluster, dbname="shop", autocommit=True) as conn:
            conn.execute(AUDIT_TRIGGER)
            # The subscriptions' owner is out of the tenant's reach: no password, no grant, no
            # change to the subscription (it would point the cluster anywhere).
            for attack in (
                "ALTER ROLE pgpanel_migrate PASSWORD 'mine-now'",
                "GRANT pgpanel_migrate TO doadmin",
                f"ALTER SUBSCRIPTION {stored.name}_0 CONNECTION 'host=192.0.2.1 dbname=x'",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(attack)
        seen_before = writer.written
        wait_until(lambda: writer.written > seen_before + 20, timeout=30, message="the writer goes on")
        out = io.StringIO()
        call_command("migration", "status", local_cluster.name, stdout=out)
        assert "syncing" in out.getvalue() and "shop" in out.getvalue()
    finally:
        writer.halt.set()
        writer.join(timeout=10)

    assert client.databases.delete_online_migration(uuid, started["id"]) is None
    assert client.databases.get_migration_status(uuid)["status"] == "done"

    with logical_source.connect("shop") as src, connect_as_client(local_cluster, dbname="shop") as dst:
        expected = rows(src)
        assert len(expected) == 500 + writer.written
        assert rows(dst) == expected
        audited = dst.execute("SELECT DISTINCT who, superuser FROM audit").fetchall()
        assert audited == [("pgpanel_migrate", False)], audited
        # The sequence followed: a new row on the cluster takes the next id.
        new_id = dst.execute("INSERT INTO items (note) VALUES ('after') RETURNING id").fetchone()[0]
        assert new_id > expected[-1][0]
        dst.commit()
        assert src.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
    with dbconn.admin_connection(local_cluster) as admin:
        assert admin.execute("SELECT count(*) FROM pg_subscription").fetchone() == (0,)
        assert admin.execute(
            "SELECT count(*) FROM pg_roles WHERE rolname = 'pgpanel_migrate'"
        ).fetchone() == (0,)
    assert not list(local_cluster.data_root.glob("*.pgpass"))
    stored.refresh_from_db()
    assert stored.password_encrypted == "" and stored.finished_at is not None

    # Migrating again clashes with what is there now: the migration fails with pg_restore's words
    # and leaves nothing behind on either side (the database it did not create stays).
    again = client.databases.update_online_migration(uuid, body)

    def failed() -> dict | None:
        status = client.databases.get_migration_status(uuid)
        return status if status["status"] == "error" else None

    status = wait_until(failed, timeout=60, message="the second migration fails")
    assert status["id"] == again["id"] and "already exists" in status["error"]  # type: ignore[index]
    with logical_source.connect("shop") as src:
        assert src.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
    with connect_as_client(local_cluster, dbname="shop") as dst:
        assert dst.execute("SELECT count(*) FROM items").fetchone() == (len(expected) + 1,)

    # A source database with no table, cut over from the Migration page.
    web = WebClient()
    web.force_login(local_cluster.owner)
    third = client.databases.update_online_migration(uuid, {**body, "ignore_dbs": ["shop"]})
    wait_until(lambda: client.databases.get_migration_status(uuid)["status"] == "syncing", timeout=60,
               message="the empty database syncs")  # fmt: skip
    page = web.get(f"/clusters/{uuid}/migration/").content.decode()
    assert "scratch" in page and f"/migration/{third['id']}/stop/" in page
    assert (
        web.post(
            f"/clusters/{uuid}/migration/{third['id']}/stop/", headers={"HX-Request": "true"}
        ).status_code
        == 200
    )
    assert client.databases.get_migration_status(uuid)["status"] == "done"
    assert local_cluster.databases.filter(name="scratch").exists()

    # The cluster deleted while a migration syncs: its slot and publication on the source go too
    # (a slot left there would keep the source's WAL for ever).
    with logical_source.connect() as src:
        src.execute("CREATE DATABASE extra")
    with logical_source.connect("extra") as src:
        src.execute("CREATE TABLE t (id int PRIMARY KEY)")
    client.databases.update_online_migration(uuid, {**body, "ignore_dbs": ["shop", "scratch"]})
    wait_until(lambda: client.databases.get_migration_status(uuid)["status"] == "syncing", timeout=60,
               message="the extra database syncs")  # fmt: skip
    with logical_source.connect("extra") as src:
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (1,)
    local_cluster.refresh_from_db()
    delete_cluster(local_cluster, confirm_name=local_cluster.name)
    with logical_source.connect("extra") as src:
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
        assert src.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
