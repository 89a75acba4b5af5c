"""Every way a migration is refused before anything is made, through the API (the error body
with its code), the page (the error next to the field, status 200 under HTMX) and the command
line; each against a real source server on loopback. Nothing is recorded, nothing is left on the
source. The legitimate migration beside these is test_migration_pydo.py's."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from panel.api import services
from panel.api.models import Scope
from panel.clusters.models import Cluster, ClusterStatus
from panel.migrate.models import OnlineMigration
from panel.migrate.tests.conftest import READER_PASSWORD, SOURCE_PASSWORD, Source

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(owner: User) -> Cluster:
    """A serving cluster's row: every refusal here comes before the cluster itself is touched."""
    return Cluster.objects.create(
        owner=owner, name="target", version="15", status=ClusterStatus.ONLINE, port=1
    )


@pytest.fixture
def loopback_allowed(settings: Any) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]


def _put(client: Client, token: str, cluster: Cluster, body: object) -> tuple[int, dict[str, Any]]:
    response = client.put(
        f"/v2/databases/{cluster.pk}/online-migration",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, response.json()


def _body(server: Source, **overrides: Any) -> dict[str, Any]:
    src = {"host": "127.0.0.1", "port": server.port, "dbname": "postgres", "username": "srcadmin",
           "password": SOURCE_PASSWORD}  # fmt: skip
    src.update(overrides.pop("source", {}))
    return {"source": src, "disable_ssl": True, **overrides}


def _nothing_made(*sources: Source) -> None:
    assert not OnlineMigration.objects.exists()
    for source in sources:
        with source.connect("shop") as conn:
            assert conn.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)


def test_api_refuses_each_bad_source_with_its_code(
    cluster: Cluster, logical_source: Source, replica_source: Source, settings: Any
) -> None:
    token = services.create_token(cluster.owner, "t", [Scope.READ, Scope.UPDATE])[1]
    client = Client()
    port = logical_source.port
    # Loopback is not a source unless the operator allows it.
    assert _put(client, token, cluster, _body(logical_source))[1]["id"] == "migration.host_forbidden"
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    first, _last = settings.PANEL_PORT_RANGE
    cases = [
        (_body(logical_source, extra=1), 422, "unprocessable_entity"),
        (_body(logical_source, source={"port": "abc"}), 422, "unprocessable_entity"),
        (_body(logical_source, source={"sslmode": "disable"}), 422, "unprocessable_entity"),
        (_body(logical_source, source={"port": 70000}), 422, "migration.port_invalid"),
        (_body(logical_source, source={"host": "/tmp"}), 422, "attach.host_invalid"),
        (_body(logical_source, source={"port": first}), 422, "migration.host_forbidden"),
        (_body(logical_source, source={"password": "wrong"}), 422, "migration.source_unreachable"),
        (_body(logical_source, source={"port": port + 1 if port < 65535 else port - 1}), 422, "migration.source_unreachable"),
        (_body(replica_source), 422, "migration.source_wal_level"),
        (_body(logical_source, source={"username": "reader", "password": READER_PASSWORD}), 422, "migration.source_rights"),
        (_body(logical_source, ignore_dbs=["nope"]), 422, "migration.ignore_unknown"),
        (_body(logical_source, ignore_dbs=["a;b"]), 422, "migration.name_invalid"),
        (_body(logical_source, ignore_dbs=["shop", "scratch"]), 422, "migration.nothing_to_migrate"),
    ]  # fmt: skip
    for body, status, code in cases:
        got_status, got = _put(client, token, cluster, body)
        assert (got_status, got["id"]) == (status, code), (body, got)
        assert got["message"] and got["request_id"]
        assert SOURCE_PASSWORD not in got["message"]
        # libpq's and the server's English words are the log's (issue 38).
        for words in ("password authentication failed", "Connection refused", "FATAL", ".s.PGSQL"):
            assert words not in got["message"], got
    _nothing_made(logical_source, replica_source)

    # Reads and stops: none yet, an unknown id, a read-only token, another account's cluster.
    headers = {"Authorization": f"Bearer {token}"}
    response = client.get(f"/v2/databases/{cluster.pk}/online-migration", headers=headers)
    assert response.status_code == 404 and response.json()["id"] == "not_found"
    response = client.delete(f"/v2/databases/{cluster.pk}/online-migration/nope", headers=headers)
    assert response.status_code == 404 and response.json()["id"] == "migration.not_found"
    read_only = services.create_token(cluster.owner, "r", [Scope.READ])[1]
    assert _put(client, read_only, cluster, _body(logical_source))[0] == 403
    outsider = User.objects.create_user("mallory", "m@example.com", "mallory-password-1")
    other_token = services.create_token(outsider, "o", [Scope.READ, Scope.UPDATE])[1]
    assert _put(client, other_token, cluster, _body(logical_source))[0] == 404
    _nothing_made(logical_source)


def test_page_shows_a_refusal_next_to_its_field(
    cluster: Cluster, replica_source: Source, loopback_allowed: None, other_client: Client
) -> None:
    client = Client()
    client.force_login(cluster.owner)
    url = f"/clusters/{cluster.pk}/migration/"
    page = client.get(url)
    assert page.status_code == 200 and b'name="host"' in page.content
    form = {"host": "127.0.0.1", "port": replica_source.port, "dbname": "postgres", "username": "srcadmin",
            "password": SOURCE_PASSWORD, "disable_ssl": "on"}  # fmt: skip
    response = client.post(url, form, headers={"HX-Request": "true"})
    assert response.status_code == 200 and b"wal_level = replica" in response.content
    response = client.post(url, {**form, "port": "0"}, headers={"HX-Request": "true"})
    assert response.status_code == 200 and b"invalid-feedback" in response.content
    assert other_client.get(url).status_code == 404
    assert other_client.post(url, form).status_code == 404
    assert not OnlineMigration.objects.exists()


def test_command_refuses_with_the_option_named(
    cluster: Cluster, logical_source: Source, loopback_allowed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIGRATION_SOURCE_PASSWORD", READER_PASSWORD)
    args = ["migration", "start", cluster.name, "--host", "127.0.0.1", "--port", str(logical_source.port)]
    args += ["--dbname", "postgres", "--username", "reader", "--disable-ssl"]
    with pytest.raises(CommandError, match=r"REPLICATION.*\(--username\)"):
        call_command(*args, stdout=io.StringIO())
    out = io.StringIO()
    call_command("migration", "status", cluster.name, stdout=out)
    assert "No online migration" in out.getvalue()
    _nothing_made(logical_source)


def test_starts_that_reach_the_network_are_rate_limited(
    cluster: Cluster, replica_source: Source, loopback_allowed: None, settings: Any
) -> None:
    settings.PANEL_MIGRATION_RATE = 2
    token = services.create_token(cluster.owner, "t", [Scope.READ, Scope.UPDATE])[1]
    client = Client()
    codes = [_put(client, token, cluster, _body(replica_source))[1]["id"] for _ in range(3)]
    assert codes == ["migration.source_wal_level", "migration.source_wal_level", "migration.rate_limited"]
    # A value refused before anything is reached does not count, and is still told apart.
    assert (
        _put(client, token, cluster, _body(replica_source, source={"port": 0}))[1]["id"]
        == "migration.port_invalid"
    )
