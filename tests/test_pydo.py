"""The managed service's official Python client, ``pydo`` 0.44, unchanged, against the panel:
only its endpoint (the test server) and its authentication policy (a bearer header over plain
HTTP on loopback; azure-core's own policy refuses anything but https) are set. A cluster is
created, provisioned by a real Celery worker, then its pools, users, dbs and CA are driven as a
script would, and the pool's URI is used to run a query through PgBouncer."""

from __future__ import annotations

import base64
import tempfile
from collections.abc import Callable

import psycopg
import pytest
from azure.core.exceptions import HttpResponseError
from django.contrib.auth.models import User

from panel.clusters.models import Cluster
from tests.fixtures.pydo import owner_client, wait_online
from tests.fixtures.pydo import pydo_client as pydo_client  # test_ha_standby_reads.py imports it from here

pytestmark = pytest.mark.django_db(transaction=True)


def test_pydo_drives_clusters_pools_users_and_dbs(
    live_server: object, owner: User, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    client = owner_client(live_server.url, owner)  # type: ignore[attr-defined]

    created = client.databases.create_cluster(
        body={
            "name": "pydo-db",
            "engine": "pg",
            "version": "15",
            "region": None,
            "size": "db-s-1vcpu-1gb",
            "num_nodes": 1,
        }
    )["database"]
    assert created["status"] == "creating" and created["connection"]["port"]
    uuid = created["id"]
    try:
        wait_online(client, uuid)
        assert [db["name"] for db in client.databases.list_clusters()["databases"]] == ["pydo-db"]

        # dbs and users, as a deploy script makes them.
        assert client.databases.add(uuid, {"name": "shop"}) == {"db": {"name": "shop"}}
        assert client.databases.get(uuid, "shop")["db"]["name"] == "shop"
        assert {db["name"] for db in client.databases.list(uuid)["dbs"]} == {"defaultdb", "shop"}
        user = client.databases.add_user(uuid, {"name": "shopapp"})["user"]
        reset = client.databases.reset_auth(uuid, "shopapp", {})["user"]
        assert reset["password"] and reset["password"] != user["password"]
        assert client.databases.get_user(uuid, "shopapp")["user"]["role"] == "normal"
        assert {u["name"] for u in client.databases.list_users(uuid)["users"]} == {"doadmin", "shopapp"}

        # A pool: add (201), get, update (204: the client returns None), then connect with its URI.
        pool = client.databases.add_connection_pool(
            uuid, {"name": "shop-pool", "mode": "transaction", "size": 5, "db": "shop", "user": "shopapp"}
        )["pool"]
        assert pool["connection"]["database"] == "shop-pool"
        body = {"mode": "transaction", "size": 8, "db": "shop", "user": "shopapp"}
        assert client.databases.update_connection_pool(uuid, "shop-pool", body) is None
        pool = client.databases.get_connection_pool(uuid, "shop-pool")["pool"]
        assert pool["size"] == 8 and pool["user"] == "shopapp"
        with psycopg.connect(pool["connection"]["uri"], connect_timeout=10) as conn:
            assert conn.execute("SELECT current_user, current_database(), 6 * 7").fetchone() == (
                "shopapp",
                "shop",
                42,
            )

        # The CA verifies the server: verify-full with the certificate pydo returned.
        pem = base64.b64decode(client.databases.get_ca(uuid)["ca"]["certificate"])
        with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca_file:
            ca_file.write(pem)
            ca_file.flush()
            details = client.databases.get_cluster(uuid)["database"]["connection"]
            uri = details["uri"].replace("sslmode=require", f"sslmode=verify-full&sslrootcert={ca_file.name}")
            with psycopg.connect(uri, connect_timeout=10) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)

        # Trusted sources: only loopback may connect (the tests connect from there), None on 204.
        rules = {
            "rules": [{"type": "ip_addr", "value": "127.0.0.1"}, {"type": "ip_addr", "value": "10.20.0.0/16"}]
        }
        assert client.databases.update_firewall_rules(uuid, rules) is None
        listed = client.databases.list_firewall_rules(uuid)["rules"]
        assert sorted(rule["value"] for rule in listed) == ["10.20.0.0/16", "127.0.0.1"]
        with psycopg.connect(pool["connection"]["uri"], connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)

        # Configuration: a setting changed with PATCH shows in GET and in a new session.
        client.databases.patch_config(uuid, {"config": {"work_mem": 16}})
        assert client.databases.get_config(uuid)["config"]["work_mem"] == 16
        with psycopg.connect(details["uri"], connect_timeout=10) as conn:
            assert conn.execute("SHOW work_mem").fetchone() == ("16MB",)

        # Errors reach the client as the managed service's: an HttpResponseError with the body.
        with pytest.raises(HttpResponseError) as refused:
            client.databases.add_connection_pool(
                uuid, {"name": "huge", "mode": "transaction", "size": 500, "db": "shop"}
            )
        assert refused.value.status_code == 422 and "does not fit" in refused.value.response.json()["message"]
        assert client.databases.get_connection_pool(uuid, "nope")["id"] == "not_found"  # 404: a body

        assert client.databases.delete_connection_pool(uuid, "shop-pool") is None
        assert client.databases.delete_user(uuid, "shopapp") is None
        assert client.databases.delete(uuid, "shop") is None
    finally:
        assert client.databases.destroy_cluster(uuid) is None
    wait_until(lambda: not Cluster.objects.filter(pk=uuid).exists(), timeout=60)
