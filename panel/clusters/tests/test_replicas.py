"""Read-only replicas on real clusters: a replica serves reads through its own URI and through a
pool on it, refuses writes, follows its source, is promoted to a cluster that accepts writes,
and is deleted completely; what cannot be done is refused with nothing changed."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from panel import crypto
from panel.backups.services import archiving, backups
from panel.clusters import services
from panel.clusters.engine import dbconn, isolation, postgres
from panel.clusters.models import Cluster
from panel.clusters.replicas.services import replicas, streaming
from panel.clusters.services import reconciler, resize, roles
from panel.clusters.tests.conftest import can_log_in, client_params, connect_as_client
from panel.core.errors import ServiceError
from panel.pools import services as pools
from tests.fixtures.clusters import module_cluster
from tests.fixtures.wal import churning_wal

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def source(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """A 2 GB cluster (so that a smaller plan exists), shared by the module's tests."""
    with module_cluster(django_db_blocker, "replica-owner", "db-source", plan="db-s-1vcpu-2gb") as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _rows(db: None) -> None:
    """Each test's rows are rolled back; the module's source row was made outside them."""


def fresh(cluster: Cluster) -> Cluster:
    return Cluster.objects.select_related("node", "replica_of").get(pk=cluster.pk)


def test_a_replica_serves_reads_refuses_writes_and_is_promoted(
    source: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = fresh(source)
    with connect_as_client(source) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, label text)")
        conn.execute("INSERT INTO items VALUES (1, 'before')")

    # Its slot holds the source's WAL before the copy starts, while checkpoints come and go: a
    # slot made by pg_basebackup itself holds WAL only once its WAL stream connects, and a
    # checkpoint in between (two replicas made at once) recycled the file the copy started from
    # ("requested WAL segment … has already been removed": the pydo test's intermittent failure).
    held_at_copy = []
    copy = postgres.basebackup

    def watched_copy(*args: Any, **kwargs: Any) -> None:
        with dbconn.admin_connection(source) as conn:
            held_at_copy.append(
                conn.execute(
                    "SELECT restart_lsn IS NOT NULL FROM pg_catalog.pg_replication_slots WHERE slot_name = %s",
                    [args[3]],
                ).fetchone()
            )
        with churning_wal(source):  # while the copy starts
            copy(*args, **kwargs)

    monkeypatch.setattr(postgres, "basebackup", watched_copy)
    replica = replicas.add_replica(source, name="db-source-replica")
    monkeypatch.undo()
    assert held_at_copy == [(True,)]
    assert replica.status == "online" and replica.replica_of_id == source.pk
    assert replica.port != source.port and replica.os_user_name != source.os_user_name
    assert replica.ca_certificate and replica.ca_certificate != source.ca_certificate

    # Reads through its own URI (its own CA verifies its certificate), writes refused.
    uri = services.connection_details(replica).uri()
    assert f":{replica.port}/" in uri
    ca = replica.data_root / "test-ca.crt"
    ca.write_text(replica.ca_certificate)
    with psycopg.connect(uri.replace("sslmode=require", f"sslmode=verify-ca&sslrootcert={ca}")) as conn:
        assert conn.execute("SELECT label FROM items").fetchone() == ("before",)
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO items VALUES (2, 'refused')")

    # It follows the source; the source lists it with its lag.
    with connect_as_client(source) as conn:
        conn.execute("INSERT INTO items VALUES (3, 'streamed')")
    (row,) = replicas.list_replicas(source)
    assert row.replica.name == "db-source-replica" and row.state == "streaming"

    # Users follow the source (rows, passwords, PgBouncer's auth); none is made on the replica.
    reader = roles.add_user(source, "reader")
    with connect_as_client(source) as conn:
        conn.execute("GRANT SELECT ON items TO reader")
    assert can_log_in(replica, "reader", reader.password)
    with pytest.raises(ServiceError) as read_only:
        roles.add_user(fresh(replica), "writer")
    assert read_only.value.code == "replica.read_only"
    with pytest.raises(ServiceError) as no_backup:
        backups.request_backup(fresh(replica))
    assert no_backup.value.code == "backup.replica"
    # The panel's replication role streams, nothing more: no database login, even with its password.
    secret = crypto.decrypt(fresh(source).replication_password_encrypted)
    with pytest.raises(psycopg.OperationalError, match="pg_hba.conf rejects"):
        psycopg.connect(**client_params(source, user=settings.PANEL_REPLICATION_ROLE, password=secret))

    # A pool on the replica serves reads.
    pool = pools.create_pool(fresh(replica), "read-pool", "defaultdb", "reader", "transaction", 3)
    pool_uri = pools.pool_connection_details(pool).uri()
    assert f":{replica.pooler_port}/read-pool" in pool_uri

    # The source's user that pool logs in as is not deleted under it.
    with pytest.raises(ServiceError) as in_use:
        roles.delete_user(fresh(source), "reader")
    assert "read-pool" in in_use.value.message

    def streamed() -> bool:
        with psycopg.connect(pool_uri, connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM items WHERE id = 3").fetchone() == (1,)

    from panel.core.polling import wait_for

    assert wait_for(streamed, 10, interval=0.2)

    # The command line lists it and prints its own URI.
    out = io.StringIO()
    call_command("replica", "list", source.name, stdout=out)
    assert "db-source-replica" in out.getvalue() and "streaming" in out.getvalue()
    header, line = out.getvalue().splitlines()[:2]
    assert header.split()[3] == "NODE" and line.split()[3] == replica.node.name
    out = io.StringIO()
    call_command("replica", "connection", source.name, "db-source-replica", "--format", "uri", stdout=out)
    assert out.getvalue().strip() == uri

    # Neither outgrows the other: the source stays at most, the replica at least, the other's plan.
    for cluster, plan, code in (
        (source, "db-s-2vcpu-4gb", "resize.replicas_too_small"),
        (replica, "db-s-1vcpu-1gb", "replica.plan_too_small"),
    ):
        with pytest.raises(ServiceError) as refused:
            resize.check_resize(fresh(cluster), plan)
        assert refused.value.code == code, refused.value

    # The source cannot be deleted under it.
    with pytest.raises(ServiceError) as refused:
        services.delete_cluster(source, confirm_name=source.name)
    assert refused.value.code == "cluster.has_replicas"
    assert fresh(source).status == "online"

    # The replica's page says what it follows and offers Promote; the source's lists it.
    web = Client()
    web.force_login(source.owner)
    page = web.get(reverse("clusters:replicas", args=[replica.pk])).content.decode()
    assert "db-source</a>" in page and "Promote to a cluster" in page
    # One node: the replica shares its source's, and its page says so (and the node's name).
    assert replica.node_id == source.node_id
    assert "data-shares-node" in page and f'data-replica-node="{replica.node.name}"' in page
    page = web.get(reverse("clusters:replicas", args=[source.pk])).content.decode()
    assert 'data-replica="db-source-replica"' in page and f":{replica.port}<" in page
    assert f'data-replica-node="{replica.node.name}"' in page and "shared with this cluster" in page
    assert "Read-only replica of db-source" in web.get(reverse("clusters:list")).content.decode()

    # A promote POST without the replica's typed name (a replay, a forged form) changes nothing.
    promote = reverse("clusters:replica-promote", args=[replica.pk])
    for data in ({}, {"confirm_name": source.name}):
        refused_page = web.post(promote, data, headers={"HX-Request": "true"})
        assert refused_page.status_code == 200 and "HX-Redirect" not in refused_page
        assert "Type the replica name “db-source-replica” to confirm." in refused_page.content.decode()
        assert fresh(replica).replica_of_id == source.pk
        with psycopg.connect(uri) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
    assert not fresh(replica).events.filter(kind="promoted").exists()

    # Promoted with the name typed: a cluster of its own that accepts writes, the pool keeps serving.
    done = web.post(promote, {"confirm_name": "db-source-replica"}, headers={"HX-Request": "true"})
    assert done.status_code == 200, done.content.decode()
    assert done["HX-Redirect"] == reverse("clusters:detail", args=[replica.pk])
    promoted = fresh(replica)
    assert promoted.replica_of_id is None and promoted.status == "online"
    assert promoted.superuser_password_encrypted != source.superuser_password_encrypted
    assert archiving.archive_status(promoted).active  # its own WAL archive and stanza
    with psycopg.connect(uri) as conn:
        conn.execute("INSERT INTO items VALUES (4, 'written')")
    with psycopg.connect(pool_uri, connect_timeout=5) as conn:
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (3,)
        assert conn.execute("SELECT current_user").fetchone() == ("reader",)
    with connect_as_client(source) as conn:  # the source goes on alone, without the slot
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (2,)
        slots = conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone()
        assert slots == (0,)
    data_root, user = promoted.data_root, promoted.os_user_name
    services.delete_cluster(promoted, confirm_name=promoted.name)
    assert not data_root.exists() and not Cluster.objects.filter(name=promoted.name).exists()
    assert not user or not Path(f"/home/{user}").exists()


def test_the_replicas_card_refuses_bad_input_and_outsiders(source: Cluster, other_user: User) -> None:
    source = fresh(source)
    web = Client()
    web.force_login(source.owner)
    before = Cluster.objects.count()
    add = reverse("clusters:replica-add", args=[source.pk])
    response = web.post(add, {"name": "db-small", "plan": "db-s-1vcpu-1gb"}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "at least its source&#x27;s" in response.content.decode()
    response = web.post(add, {"name": "Bad Name", "plan": "db-s-1vcpu-2gb"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and "invalid-feedback" in response.content.decode()
    assert Cluster.objects.count() == before
    promote = web.post(reverse("clusters:replica-promote", args=[source.pk]), headers={"HX-Request": "true"})
    assert "is not a read-only replica" in promote.content.decode()

    outsider = Client()
    outsider.force_login(other_user)
    assert outsider.get(reverse("clusters:replicas", args=[source.pk])).status_code == 404
    assert outsider.post(add, {"name": "db-mine", "plan": "db-s-1vcpu-2gb"}).status_code == 404
    assert outsider.post(reverse("clusters:replica-promote", args=[source.pk])).status_code == 404
    assert Cluster.objects.count() == before

    # A replica being made shows as forking, and the card polls until it is online.
    replicas.create_replica(source, name="db-pending", enqueue=False)
    page = web.get(reverse("clusters:replicas", args=[source.pk])).content.decode()
    assert 'data-status="forking"' in page and "every 2s" in page


def test_bad_requests_are_refused_with_nothing_made(source: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    source = fresh(source)
    before = Cluster.objects.count()
    monkeypatch.setattr(replicas, "MAX_REPLICAS", 0)
    with pytest.raises(ServiceError) as too_many:
        replicas.create_replica(source, name="db-one-more", enqueue=False)
    assert too_many.value.code == "replica.too_many"
    monkeypatch.undo()
    cases = [
        ({"name": "db-small", "plan_slug": "db-s-1vcpu-1gb"}, "replica.plan_too_small"),
        ({"name": "db-odd", "plan_slug": "db-s-1vcpu-512mb"}, "cluster.plan_unknown"),
        ({"name": "bad name!", "plan_slug": None}, None),
        ({"name": "db-source", "plan_slug": None}, "cluster.name_taken"),
    ]
    for kwargs, code in cases:
        with pytest.raises(ServiceError) as refused:
            replicas.create_replica(source, enqueue=False, **kwargs)  # type: ignore[arg-type]
        if code:
            assert refused.value.code == code
        assert refused.value.field in {"name", "plan"}
    assert Cluster.objects.count() == before

    with pytest.raises(ServiceError) as not_replica:
        replicas.promote_replica(source)
    assert not_replica.value.code == "replica.not_a_replica"
    with connect_as_client(source) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)

    # The tenant cannot take over the panel's replication role on its source.
    with connect_as_client(source, autocommit=True) as conn:
        for statement in (
            f"ALTER ROLE {settings.PANEL_REPLICATION_ROLE} PASSWORD 'mine'",
            f"GRANT {settings.PANEL_REPLICATION_ROLE} TO doadmin",
            "CREATE ROLE thief REPLICATION LOGIN PASSWORD 'x'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)

    with pytest.raises(CommandError):
        call_command("replica", "promote", source.name, "--name", "nope")


def test_a_cluster_from_before_gets_the_replication_role_reserved_without_a_restart(source: Cluster) -> None:
    """The upgrade: panel.conf reserving only the older roles is rewritten and reloaded by the
    reconciler (no restart), and the tenant cannot take the replication role any more."""
    source = fresh(source)
    conf = source.pgdata / "panel.conf"
    role = settings.PANEL_REPLICATION_ROLE
    old = "\n".join(
        line.replace(f', "{role}"', "") if "reserved_roles" in line else line
        for line in conf.read_text().splitlines()
    )
    conf.write_text(old + "\n")
    isolation.reload_server_config(source)
    pid = postgres.postmaster_pid(source.pgdata)

    def reserved() -> str:
        with dbconn.admin_connection(source) as conn:
            return conn.execute("SHOW pgpanel_guard.reserved_roles").fetchone()[0]

    assert role not in reserved()
    reconciler.reconcile()
    assert role in reserved() and postgres.postmaster_pid(source.pgdata) == pid
    assert source.events.filter(kind="guard-updated").exists()
    with (
        connect_as_client(source, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'mine'")


@pytest.mark.django_db(transaction=True)
def test_pydo_makes_and_promotes_a_replica_through_a_real_worker(
    source: Cluster, live_server: object, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    """pydo 0.44's replica calls, unchanged, against the panel; the replica is made by a real
    Celery worker process. Last in the module: its flush removes the module's rows."""
    from azure.core.credentials import AzureKeyCredential
    from azure.core.exceptions import HttpResponseError
    from azure.core.pipeline.policies import AzureKeyCredentialPolicy
    from pydo import Client

    from panel.api import services as api_services
    from panel.api.models import Scope

    source = fresh(source)
    token = api_services.create_token(source.owner, "pydo", [scope.value for scope in Scope])[1]
    policy = AzureKeyCredentialPolicy(AzureKeyCredential(token), "Authorization", prefix="Bearer")
    client = Client(token, endpoint=live_server.url, authentication_policy=policy, retry_total=0)  # type: ignore[attr-defined]
    uuid = str(source.pk)

    made = client.databases.create_replica(uuid, {"name": "db-api-replica", "size": "db-s-1vcpu-2gb"})[
        "replica"
    ]
    assert made["status"] == "forking" and made["size"] == "db-s-1vcpu-2gb"
    gone = client.databases.create_replica(uuid, {"name": "db-api-gone"})["replica"]  # the source's plan
    assert gone["size"] == source.plan_slug

    def online(name: str) -> bool:
        got = client.databases.get_replica(uuid, name)
        assert "replica" in got, list(source.events.filter(level="error").values_list("message", flat=True))
        return got["replica"]["status"] == "online"

    for name in ("db-api-replica", "db-api-gone"):
        wait_until(lambda name=name: online(name), timeout=120, message=f"the worker made {name}")

    # Deleted: its processes, files, system user, slot on the source and rows are gone.
    doomed = Cluster.objects.get(pk=gone["id"])
    data_root, slot = doomed.data_root, streaming.slot_name(doomed)
    assert client.databases.destroy_replica(uuid, "db-api-gone") is None
    wait_until(lambda: not Cluster.objects.filter(pk=gone["id"]).exists(), timeout=60)
    assert not data_root.exists()
    with connect_as_client(source) as conn:
        assert conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall() == [
            (streaming.slot_name(Cluster.objects.get(pk=made["id"])),)
        ]
    assert slot not in streaming.replica_lag(source)

    (listed,) = client.databases.list_replicas(uuid)["replicas"]
    uri = listed["connection"]["uri"]
    assert listed["connection"]["port"] != source.port and listed["connection"]["password"]
    with psycopg.connect(uri, connect_timeout=10) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("CREATE TABLE refused (id int)")

    # Refusals in the managed service's error shape; nothing made.
    for body, status in (
        ({"name": "db-small", "size": "db-s-1vcpu-1gb"}, 422),
        ({"name": "db-api-replica"}, 409),
        ({"name": "no spaces"}, 422),
    ):
        with pytest.raises(HttpResponseError) as refused:
            client.databases.create_replica(uuid, body)
        assert refused.value.status_code == status
    assert client.databases.promote_replica(uuid, "nope")["id"] == "replica.not_found"  # 404: a body
    with pytest.raises(HttpResponseError) as kept:  # the source is not deleted under its replica
        client.databases.destroy_cluster(uuid)
    assert kept.value.response.json()["id"] == "cluster.has_replicas"
    assert len(client.databases.list_replicas(uuid)["replicas"]) == 1

    assert client.databases.promote_replica(uuid, "db-api-replica") is None
    assert client.databases.list_replicas(uuid)["replicas"] == []
    with psycopg.connect(uri, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE written (id int)")
    assert client.databases.destroy_cluster(listed["id"]) is None
    wait_until(lambda: not Cluster.objects.filter(pk=listed["id"]).exists(), timeout=60)
