"""Issue 37, item 4: a tenant took the panel's replication role.

``POST /v2/databases/{id}/users {"name": "pgpanel_replication"}`` answered 201 (the names the
panel refused lacked it), the panel made the role as its superuser, and creating a replica then
made that role the panel's replication role (``ensure_replication_role`` altered a role that
existed: REPLICATION and the panel's password), ``reset_auth`` gave the tenant the password and
``pg_basebackup`` copied the server's data directory. Replayed here: the name is refused by the
API, the form and the command line; a role of that name made as the old API made it is not
taken over by a replica build (nor reset through the panel), and a replica still streams once
the role is the panel's own.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from panel import crypto
from panel.api import services as tokens
from panel.api.models import Scope
from panel.clusters.engine import dbconn, guard, panel_roles
from panel.clusters.models import Cluster, DatabaseUser
from panel.clusters.replicas.services import replicas
from panel.clusters.services import roles
from panel.clusters.tests.conftest import connect_as_client
from panel.core.errors import ServiceError
from panel.managed.services.logical_replication import set_replication as allow

pytestmark = pytest.mark.integration
ROLE = settings.PANEL_REPLICATION_ROLE


def _post(client: Client, token: str, path: str, body: dict[str, str]) -> tuple[int, dict[str, Any]]:
    response = client.post(
        path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    return response.status_code, response.json()


def _role(cluster: Cluster, name: str) -> tuple[Any, ...] | None:
    """What a takeover would change: attributes, SCRAM secret, comment."""
    with dbconn.admin_connection(cluster) as conn:
        return conn.execute(
            "SELECT rolreplication, rolsuper, rolcanlogin, rolpassword, "
            "pg_catalog.shobj_description(oid, 'pg_authid') FROM pg_catalog.pg_authid WHERE rolname = %s",
            [name],
        ).fetchone()


def test_the_panels_role_names_are_refused_everywhere_and_are_the_guards(
    local_cluster: Cluster, owner: User, owner_client: Client
) -> None:
    _plain, token = tokens.create_token(owner, "roles", [Scope.READ, Scope.CREATE])
    users = f"/v2/databases/{local_cluster.pk}/users"
    for name in settings.PANEL_ROLES:
        status, body = _post(Client(), token, users, {"name": name})
        assert status == 422, body
        assert body["id"] == "user.name_reserved" and "reserved" in body["message"]
    page = owner_client.post(
        reverse("clusters:user-add", args=[local_cluster.pk]), {"user-name": ROLE}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert f"“{ROLE}” is reserved" in page
    with pytest.raises(CommandError, match="reserved"):
        call_command("cluster", "user-add", local_cluster.name, ROLE)
    assert _role(local_cluster, ROLE) is None
    assert not local_cluster.users.filter(name__in=settings.PANEL_ROLES).exists()

    # One list: the guard reserves the same roles, and every role a fresh cluster has that is not
    # PostgreSQL's own nor the tenant's admin is on it.
    assert set(settings.PANEL_ROLES) <= set(guard.reserved_roles())
    with dbconn.admin_connection(local_cluster) as conn:
        made = {
            name
            for (name,) in conn.execute(
                "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname !~ '^pg_'"
            ).fetchall()
        }
    assert made - {local_cluster.admin_user} <= set(settings.PANEL_ROLES), made

    # The legitimate action beside it: an ordinary name is added.
    status, body = _post(Client(), token, users, {"name": "app_user"})
    assert status == 201, body
    assert _role(local_cluster, "app_user") is not None


def test_a_replica_build_leaves_a_replication_role_the_panel_did_not_make(local_cluster: Cluster) -> None:
    # What the old API did for {"name": "pgpanel_replication"}: the role, made by the panel's
    # superuser with the tenant's password, and the tenant's row for it.
    tenant_password = "tenant-chosen-password-1"
    with dbconn.admin_connection(local_cluster) as conn:
        dbconn.create_role(conn, ROLE, tenant_password)
    row = DatabaseUser(cluster=local_cluster, name=ROLE)
    row.password = tenant_password
    row.save()
    before = _role(local_cluster, ROLE)
    assert before is not None and before[0] is False

    with pytest.raises(ServiceError) as refused:
        replicas.add_replica(local_cluster, name=f"{local_cluster.name}-r")
    assert "did not make" in str(refused.value) and ROLE in str(refused.value)
    assert _role(local_cluster, ROLE) == before  # not altered: no REPLICATION, its own password
    assert not Cluster.objects.filter(replica_of=local_cluster).exists()
    # Nor does the panel reset that role's password, drop it or make it a logical replication
    # role for the tenant.
    for action in (roles.reset_password, roles.delete_user, lambda cluster, name: allow(cluster, name, True)):
        with pytest.raises(ServiceError) as reserved:
            action(local_cluster, ROLE)
        assert reserved.value.code == "user.name_reserved"
    assert _role(local_cluster, ROLE) == before

    # A cluster where the old code already took it over (REPLICATION, the panel's password,
    # which the tenant then reset): the role is still the tenant's, not taken again.
    local_cluster.refresh_from_db()
    with dbconn.admin_connection(local_cluster) as conn:
        dbconn.set_password(conn, ROLE, crypto.decrypt(local_cluster.replication_password_encrypted))
        conn.execute(f'ALTER ROLE "{ROLE}" REPLICATION')
    with pytest.raises(ServiceError, match="did not make"):
        replicas.add_replica(local_cluster, name=f"{local_cluster.name}-r")

    # The legitimate action beside it: once the operator removed that role, a replica is made
    # with the panel's own role (marked as the panel's) and streams.
    with dbconn.admin_connection(local_cluster) as conn:
        conn.execute(f'DROP ROLE "{ROLE}"')
    row.delete()
    replica = replicas.add_replica(local_cluster, name=f"{local_cluster.name}-r")
    assert replica.status == "online"
    (listed,) = replicas.list_replicas(local_cluster)
    assert listed.state == "streaming"
    ours = _role(local_cluster, ROLE)
    assert ours is not None and ours[0] is True and ours[4].startswith(panel_roles.MARK_PREFIX)


def test_a_role_is_the_panels_by_its_mark_or_by_the_password_the_panel_kept(local_cluster: Cluster) -> None:
    """A role made before the mark is recognised by its password (and marked then); a mark copied
    from another role, or a wrong password, is not the panel's."""
    with dbconn.admin_connection(local_cluster) as conn:
        dbconn.create_role(conn, "legacy_role", "kept-by-the-panel-1")
        dbconn.create_role(conn, "copied_mark", "chosen-by-a-tenant-1")
        assert panel_roles.claim(conn, "no_such_role") is False
        secret = dbconn.scram_verifier(conn, "legacy_role", "kept-by-the-panel-1")
        assert panel_roles.scram_checks(secret, "kept-by-the-panel-1")
        assert not panel_roles.scram_checks(secret, "kept-by-the-panel-2")
        # A secret made to order (ALTER ROLE … PASSWORD 'SCRAM-SHA-256$…') costs no more than ours.
        assert "$4096:" in secret
        assert not panel_roles.scram_checks(secret.replace("$4096:", "$2000000000:"), "kept-by-the-panel-1")
        with pytest.raises(panel_roles.NotPanelRole):
            panel_roles.claim(conn, "legacy_role", lambda: "a-wrong-password")
        assert panel_roles.claim(conn, "legacy_role", lambda: "kept-by-the-panel-1") is True
        assert panel_roles.claim(conn, "legacy_role") is True  # marked now
        mark = conn.execute(
            "SELECT pg_catalog.shobj_description('legacy_role'::regrole, 'pg_authid')"
        ).fetchone()
        assert mark is not None
        conn.execute(
            psycopg.sql.SQL("COMMENT ON ROLE copied_mark IS {}").format(psycopg.sql.Literal(mark[0]))
        )
        with pytest.raises(panel_roles.NotPanelRole):
            panel_roles.claim(conn, "copied_mark", lambda: "kept-by-the-panel-1")
        conn.execute("DROP ROLE legacy_role")
        conn.execute("DROP ROLE copied_mark")
    # The tenant's admin makes no role of the panel's name in SQL (the guard reserves every one)
    # nor marks one; an ordinary role it makes as before.
    with connect_as_client(local_cluster, autocommit=True) as conn:
        for statement in (
            f"CREATE ROLE {ROLE} LOGIN",
            f"COMMENT ON ROLE {settings.PANEL_MONITOR_ROLE} IS 'x'",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
        conn.execute("CREATE ROLE tenant_own LOGIN")
        conn.execute("DROP ROLE tenant_own")
