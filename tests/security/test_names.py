"""Issue 29, item 4: a name ending in a newline passed every check (``re.match`` with ``$``).

``POST …/users {"name": "atk2nl\\n"}`` answered 500, the role stayed in PostgreSQL, the agent
logged ``ValueError: … cannot be written to pg_ident.conf`` and every later ``POST …/users`` on
that cluster answered 500; ``POST …/dbs {"name": "atk2nldb\\n"}`` answered 201. Replayed here
through the API with this process as the web and a real node agent doing the work, beside a name
with an inner hyphen that is still accepted.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from panel.api import services as tokens
from panel.api.models import Scope
from panel.clusters.engine import dbconn
from panel.clusters.lib import names
from panel.clusters.models import Cluster, DatabaseUser
from panel.clusters.services import nodes
from panel.core import agent
from panel.core.errors import ServiceError
from panel.pools.lib.pgbouncer_ini import InvalidPoolName, validate_pool_name
from tests.test_node_agent import agent_worker  # noqa: F401  (the fixture: a real node agent)

# Every kind of name, with a good one that has an inner hyphen.
VALIDATORS = [
    (names.validate_cluster_name, "my-db"),
    (names.validate_replica_name, "my-replica"),
    (names.validate_node_name, "node-2"),
    (functools.partial(names.validate_role_name, panel_roles=settings.PANEL_ROLES), "app-user"),
    (names.validate_database_name, "app-db"),
    (validate_pool_name, "test-pool"),
]
BAD_ENDINGS = ["\n", "\r\n", "\r", "\x00", "\t", " "]


@pytest.mark.parametrize(("validate", "good"), VALIDATORS)
def test_every_name_is_matched_whole(validate: Any, good: str) -> None:
    assert validate(good) == good
    for ending in BAD_ENDINGS:
        with pytest.raises((names.InvalidName, InvalidPoolName)):
            validate(good + ending)
        with pytest.raises((names.InvalidName, InvalidPoolName)):
            validate(good[:2] + ending + good[2:])


def test_a_crash_in_the_agent_is_a_refusal_with_a_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the agent's function raised, the web answers a ServiceError (a 422 in the API's
    shape), never an exception that becomes a 500."""

    class Answered:
        def get(self, **_kwargs: object) -> dict[str, str]:
            return {"crash": "panel.clusters.roles.add_user failed in the node agent: ValueError: x"}

        def forget(self) -> None:
            pass

    monkeypatch.setattr(agent.taskqueue, "send", lambda *_a, **_k: Answered())
    with pytest.raises(ServiceError) as refused:
        agent.send("panel.clusters.roles.add_user", (), {}, timeout=5)
    assert refused.value.code == "agent.failed"


def _post(client: Client, token: str, path: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
    response = client.post(
        path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    return response.status_code, response.json()


def _roles(cluster: Cluster) -> set[str]:
    with dbconn.admin_connection(cluster) as conn:
        return {row[0] for row in conn.execute("SELECT rolname FROM pg_catalog.pg_roles").fetchall()}


def _databases(cluster: Cluster) -> set[str]:
    with dbconn.admin_connection(cluster) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_catalog.pg_database").fetchall()}


@pytest.mark.integration
def test_a_name_ending_in_a_newline_is_refused_and_leaves_nothing(
    local_cluster: Cluster,
    owner: User,
    agent_worker: Path,  # noqa: F811
) -> None:
    _plain, token = tokens.create_token(owner, "names", [Scope.READ, Scope.CREATE])
    # The heartbeat the node agent sends every 10 s (a bare worker here): the web calls it.
    nodes.heartbeat(inventory=False)
    client = Client()
    users = f"/v2/databases/{local_cluster.pk}/users"
    dbs = f"/v2/databases/{local_cluster.pk}/dbs"

    status, body = _post(client, token, users, {"name": "atk2nl\n"})
    assert status == 422, body
    assert body["id"] == "user.name_invalid"
    assert "atk2nl\n" not in _roles(local_cluster)
    assert not local_cluster.users.filter(name__startswith="atk2nl").exists()

    status, body = _post(client, token, dbs, {"name": "atk2nldb\n"})
    assert status == 422, body
    assert body["id"] == "database.name_invalid"
    assert "atk2nldb\n" not in _databases(local_cluster)

    # A cluster attacked before the fix keeps such a role and its row: later users still come.
    with dbconn.admin_connection(local_cluster) as conn:
        dbconn.create_role(conn, "atk2old\n", "not-used-password-1")
    DatabaseUser.objects.create(cluster=local_cluster, name="atk2old\n", password_encrypted="x")

    # The legitimate action beside it: names with an inner hyphen, on the same cluster, after.
    status, body = _post(client, token, users, {"name": "app-user"})
    assert status == 201, body
    assert body["user"]["name"] == "app-user"
    status, body = _post(client, token, dbs, {"name": "app-db"})
    assert status == 201, body
    assert {"app-user"} <= _roles(local_cluster) and {"app-db"} <= _databases(local_cluster)
