"""The panel's roles never come in through a cluster's public port, replayed for real (issue 37,
item 2).

The attack (before the fix): on a cluster with standbys HAProxy reached the members from
127.0.0.1, which their pg_hba.conf trusted for the panel's superuser (replication and pg_rewind
between members) and its replication role (read-only replicas streamed through HAProxy), and the
clients' own lines let ``pgpanel_monitor`` and ``pgpanel_migrate`` in from there too. A wrong
password for ``pgpanel`` through the public port answered ``password authentication failed``: the
superuser's login was offered to anyone who reached the port. On a one-member cluster the
monitor and migration roles were offered a password from every address.

Now HAProxy connects from an address of its own (``firewall.HAPROXY_SOURCE``) that the members'
pg_hba.conf refuses every panel role from, before any other line, and no panel role has a TCP
line beyond the members' and replicas' own: the same logins are refused by pg_hba.conf, no
password asked. Beside it: ``doadmin`` through the port works, the standby streams, and a
switchover still works (Patroni's replication and pg_rewind between members are not behind
HAProxy).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, MemberRole
from panel.clusters.standbys.services import ha, switchover
from panel.clusters.tests.conftest import client_params, module_cluster_fixture
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "hba-owner"
WRONG = "not-the-password-0"
TIMEOUT = 120


def panel_logins() -> list[dict[str, str]]:
    """Each panel role, into a database and as a replication connection."""
    roles = [
        settings.PANEL_SUPERUSER,
        settings.PANEL_REPLICATION_ROLE,
        settings.PANEL_MONITOR_ROLE,
        settings.PANEL_MIGRATION_ROLE,
    ]
    logins = [{"user": role, "dbname": "postgres"} for role in roles]
    logins += [{"user": role, "dbname": "replication", "replication": "true"} for role in roles]
    return logins


def _answer(params: dict[str, Any]) -> str:
    """What the server answers a login with a wrong password."""
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(**{**params, "password": WRONG}).close()
    return str(caught.value)


def _refused_by_hba(cluster: Cluster, port: int) -> None:
    for login in panel_logins():
        params = {**client_params(cluster, port=port, password=WRONG), **login}
        answer = _answer(params)
        assert "password authentication failed" not in answer, (login, answer)
        assert "pg_hba.conf rejects" in answer or "no pg_hba.conf entry" in answer, (login, answer)


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[Cluster]:
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-hba") as cluster:
        yield cluster


one_member = module_cluster_fixture("hba-one-owner", "db-hba-one")


def _doadmin_in(cluster: Cluster, port: int) -> bool:
    with psycopg.connect(**client_params(cluster, port=port)) as conn:  # type: ignore[arg-type]
        return conn.execute("SELECT current_user").fetchone() == ("doadmin",)


def _streaming(cluster: Cluster) -> int:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE state = 'streaming'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_the_panel_roles_are_refused_through_haproxy_before_a_password(ha_cluster: Cluster) -> None:
    cluster = ha_cluster
    for port in (int(cluster.port or 0), int(cluster.standby_port or 0)):
        _refused_by_hba(cluster, port)
        assert _doadmin_in(cluster, port)


def test_the_standby_streams_and_a_switchover_still_works(ha_cluster: Cluster, wait_until: Any) -> None:
    cluster = ha_cluster
    wait_until(lambda: _streaming(cluster) == 1, timeout=TIMEOUT, message="the standby streams")
    switchover.switchover(cluster, "member-2")
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    ha.refresh_members(cluster)
    assert cluster.members.get(role=MemberRole.PRIMARY).name == "member-2"
    # The old primary was rewound and streams from the new one (Patroni's own logins).
    wait_until(lambda: _streaming(cluster) == 1, timeout=TIMEOUT, message="member-1 streams again")
    _refused_by_hba(cluster, int(cluster.port or 0))
    assert _doadmin_in(cluster, int(cluster.port or 0))


def test_a_one_member_cluster_offers_no_panel_role_a_password(one_member: Cluster) -> None:
    port = int(one_member.port or 0)
    for login in panel_logins():
        if login["user"] == settings.PANEL_REPLICATION_ROLE and "replication" in login:
            # Its same-node replicas stream from loopback with it (no HAProxy between).
            continue
        params = {**client_params(one_member, port=port, password=WRONG), **login}
        answer = _answer(params)
        assert "password authentication failed" not in answer, (login, answer)
    assert _doadmin_in(one_member, port)
