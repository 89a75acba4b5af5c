"""Patroni's REST API asks for the cluster's credentials, replayed for real on one two-member
cluster (Patroni, etcd, HAProxy): the session's shared pair.

The attack (before the fix): a member's REST port (its node's address once members are spread)
took any request. ``PATCH /config`` with an ``archive_command`` runs a command as the cluster's OS
user; ``POST /restart`` or ``/switchover`` interrupts the cluster. Now each is refused with 401
without the cluster's REST user and password (and with a wrong one), and changes nothing; the
panel's own switchover and configuration change still work, and the reads HAProxy and the panel
make (``GET /primary``, ``/replica``, ``/cluster``) stay open.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, credentials
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha, ha_files, membership, switchover
from panel.core.polling import wait_for
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "rest-owner"
TIMEOUT = 60


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[Cluster]:
    """The session's two-member db-s-1vcpu-2gb cluster, named db-rest for the module, both
    members streaming (a loan puts member-1 back as the primary and leaves nothing of this
    module's on it: the switchover is undone, the PATCH sent back, the credentials written in)."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-rest") as cluster:
        yield cluster


def _leader(cluster: Cluster) -> Any:
    primary = next(s for s in ha.read_statuses(cluster) if s.is_primary)
    return cluster.members.get(name=primary.name)


def _config(member: Any) -> dict[str, Any]:
    status, text = patroni.rest("GET", member.rest_port, "/config", host=member.host)
    assert status == 200, text
    return json.loads(text)


def test_unsafe_requests_without_the_clusters_credentials_are_refused_and_change_nothing(
    ha_cluster: Cluster, tmp_path: Path
) -> None:
    cluster = ha_cluster
    leader = _leader(cluster)
    standby = cluster.members.exclude(pk=leader.pk).get()
    before = _config(leader)
    marker = tmp_path / "pwned"
    evil = {"postgresql": {"parameters": {"archive_command": f"touch {marker}"}}}
    username, password = credentials.rest_credentials(cluster)
    for auth in (None, (username, "not-the-password"), ("patroni", password)):
        status, text = patroni.rest("PATCH", leader.rest_port, "/config", evil, host=leader.host, auth=auth)
        assert status == 401, (auth and auth[0], status, text)
    pids = {m.name: postgres.postmaster_pid(Path(m.data_dir)) for m in cluster.members.all()}
    for member in (leader, standby):
        for path, body in (("/restart", {}), ("/reinitialize", {}), ("/reload", {})):
            assert patroni.rest("POST", member.rest_port, path, body, host=member.host)[0] == 401, path
    switch = {"leader": leader.name, "candidate": standby.name}
    assert patroni.rest("POST", leader.rest_port, "/switchover", switch, host=leader.host)[0] == 401
    assert patroni.rest("POST", leader.rest_port, "/failover", switch, host=leader.host)[0] == 401

    assert _config(leader) == before  # nothing reached etcd
    assert _leader(cluster).name == leader.name
    assert {m.name: postgres.postmaster_pid(Path(m.data_dir)) for m in cluster.members.all()} == pids
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute("SHOW archive_command").fetchone()
    assert row is not None and str(marker) not in row[0]
    assert not marker.exists()


def test_reads_stay_open_for_haproxy_and_the_panel(ha_cluster: Cluster) -> None:
    leader = _leader(ha_cluster)
    standby = ha_cluster.members.exclude(pk=leader.pk).get()
    assert patroni.rest("GET", leader.rest_port, "/primary", host=leader.host)[0] == 200
    assert patroni.rest("GET", standby.rest_port, "/replica", host=standby.host)[0] == 200
    assert patroni.rest("GET", standby.rest_port, "/primary", host=standby.host)[0] == 503
    assert patroni.rest("GET", leader.rest_port, "/cluster", host=leader.host)[0] == 200


def test_the_panels_own_switchover_and_configuration_change_still_work(ha_cluster: Cluster) -> None:
    cluster = ha_cluster
    leader = _leader(cluster)
    candidate = cluster.members.exclude(pk=leader.pk).get()
    assert switchover.switchover(cluster, candidate.name) == candidate.name
    assert _leader(cluster).name == candidate.name
    assert ha.wait_healthy(cluster, TIMEOUT)
    # The panel's PATCH /config (the settings Patroni keeps in etcd, as a resize sends them).
    # (GET /config answers from Patroni's view of etcd, read again on its next loop.)
    membership.patch_dynamic(cluster, strict=True)
    assert wait_for(lambda: _config(candidate)["synchronous_mode_strict"] is True, 10, interval=0.2)
    membership.patch_dynamic(cluster)
    assert wait_for(lambda: _config(candidate)["synchronous_mode_strict"] is False, 10, interval=0.2)


def test_a_member_configured_before_the_credentials_gets_them_from_the_reconciler(
    ha_cluster: Cluster,
) -> None:
    """An upgrade: a member whose configuration file predates the REST credentials (as written by
    the panel before them) answers unsafe requests from anyone; the reconciler's step for the
    members' Patroni files (``ha_files.follow_etcd``) writes them in and reloads it, after which
    the same request is refused."""
    cluster = ha_cluster
    member = cluster.members.order_by("name").first()
    assert member is not None
    path = ha_files.member_config_path(cluster, member)
    old = json.loads(path.read_text())
    del old["restapi"]["authentication"]
    path.write_text(json.dumps(old))
    patroni.reload_member(path)
    opened = wait_for(
        lambda: patroni.rest("POST", member.rest_port, "/reload", {}, host=member.host)[0] != 401,
        20,
        interval=0.3,
    )
    assert opened, "the member still asked for credentials after its authentication was taken out"

    note = ha_files.follow_etcd(cluster, member)
    assert note is not None and "credentials" in note
    assert "authentication" in json.loads(path.read_text())["restapi"]
    assert wait_for(
        lambda: patroni.rest("POST", member.rest_port, "/reload", {}, host=member.host)[0] == 401,
        20,
        interval=0.3,
    )
    username, password = credentials.rest_credentials(cluster)
    auth = (username, password)
    assert patroni.rest("POST", member.rest_port, "/reload", {}, host=member.host, auth=auth)[0] in (200, 202)
