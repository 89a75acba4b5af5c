"""The Connection Pools tab against a real cluster: the form's submit returns once PgBouncer serves
the pool; edits apply online; the delete confirmation counts the clients it will disconnect."""

from __future__ import annotations

import psycopg
import pytest
from django.urls import reverse

from panel.pools import services
from panel.pools.models import ConnectionPool

pytestmark = pytest.mark.integration
HTMX = {"HX-Request": "true"}


def test_create_edit_and_delete_a_pool_from_the_tab(owner_client, local_cluster):
    cluster = local_cluster
    list_url = reverse("pools:list", args=[cluster.pk])
    assert "0 of 22 connections allocated to pools" in owner_client.get(list_url).content.decode()

    response = owner_client.post(
        reverse("pools:create", args=[cluster.pk]),
        {"name": "test-pool", "database": "defaultdb", "user": "", "mode": "transaction", "size": "12"},
        headers=HTMX,
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Pool “test-pool” created" in page
    assert 'data-pool="test-pool"' in page
    assert "12 of 22 connections allocated to pools" in page
    assert 'data-used="12" data-total="22"' in page
    pool = ConnectionPool.objects.get(cluster=cluster, name="test-pool")

    # Usable as soon as the submit returned, with the URI the pool page shows.
    uri = owner_client.get(
        reverse("pools:connection-secret", args=[cluster.pk, pool.pk]), {"format": "uri"}
    ).content.decode()
    assert f":{cluster.pooler_port}/test-pool?sslmode=require" in uri
    with psycopg.connect(uri, connect_timeout=5) as client:
        assert client.execute("SELECT current_database(), current_user").fetchone() == (
            "defaultdb",
            "doadmin",
        )

        # The live figures come from PgBouncer: one client connected, nobody waiting.
        stats = owner_client.get(reverse("pools:stats", args=[cluster.pk]), headers=HTMX).content.decode()
        assert "PgBouncer is not answering" not in stats
        assert '<span class="badge text-bg-success">Active</span>' in stats
        assert 'data-figure="clients">1 / <span>0</span></td>' in stats

        # The delete confirmation counts that client.
        confirm = owner_client.get(
            reverse("pools:delete", args=[cluster.pk, pool.pk]), headers=HTMX
        ).content.decode()
        assert "1 client is connected to this pool now." in confirm
        assert "every client connected to it is disconnected" in confirm

    edit = owner_client.post(
        reverse("pools:edit", args=[cluster.pk, pool.pk]),
        {"database": "defaultdb", "user": "", "mode": "session", "size": "20"},
        headers=HTMX,
    )
    assert edit.status_code == 200
    text = edit.content.decode()
    assert "updated; PgBouncer applied the change online" in text
    assert 'id="conn-user"' in text
    pool.refresh_from_db()
    assert (pool.size, pool.mode, pool.user) == (20, "session", "")
    assert "20 of 22 connections allocated to pools" in owner_client.get(list_url).content.decode()
    with psycopg.connect(uri, connect_timeout=5) as client:
        assert client.execute("SELECT 1").fetchone() == (1,)

    deleted = owner_client.post(reverse("pools:delete", args=[cluster.pk, pool.pk]), headers=HTMX)
    assert deleted.status_code == 200
    assert deleted["HX-Redirect"] == list_url
    assert not ConnectionPool.objects.filter(cluster=cluster).exists()
    page = owner_client.get(list_url).content.decode()
    assert "deleted; 0 connected clients were disconnected" in page
    assert "0 of 22 connections allocated to pools" in page
    assert not services.pooler_running(cluster)
