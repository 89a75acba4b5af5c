"""One etcd scope per cluster, replayed for real on the session's two-member cluster (Patroni,
etcd, HAProxy) beside another cluster's scope in the same panel etcd.

The attack (before the fix): whoever runs commands as a cluster's OS user (issue 37: the
superuser's password from a migration trigger, then ``COPY … TO PROGRAM``) reads its Patroni's
configuration and holds the panel's etcd client certificate. With it, etcd listed every key of
every cluster and took a write of another cluster's ``/config``, whose ``archive_command`` that
cluster's archiver then runs as its own OS user. Now etcd's authentication is on: the
certificate alone (JSON gateway or gRPC, where etcd would take its common name as the user)
opens nothing, and the user and password in the configuration read and write only the
cluster's own scope. Beside it: the cluster's Patroni, logged in as that user, still holds the
leader key and fails over.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from panel.clusters.engine import isolation
from panel.clusters.models import Cluster, ClusterMember, MemberRole
from panel.clusters.standbys.engine import etcd as engine
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib.patroni import ETCD_USER_TAG, NAMESPACE
from panel.clusters.standbys.services import etcd, ha, ha_files
from panel.core import runas
from panel.core.polling import wait_for
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner
from tests.security.clusteruser import as_user

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "etcd-scope-owner"
TIMEOUT = 180
# Another cluster's scope, as the panel makes them (its /config is what its Patroni applies).
OTHER_SCOPE = "cluster-0123456789abcdef0123456789abcdef"
OTHER_CONFIG = f"{NAMESPACE}{OTHER_SCOPE}/config"
OTHER_VALUE = json.dumps({"ttl": 30, "postgresql": {"parameters": {"archive_command": "/bin/true"}}})
FORGED = json.dumps({"ttl": 30, "postgresql": {"parameters": {"archive_command": "id > /tmp/owned"}}})

# What the tenant runs as the cluster's OS user: the system's Python, its standard library only,
# with what the member's Patroni configuration holds (0600, that user's).
ATTACK = r"""
import base64, http.client, json, ssl, sys
section = json.load(open(sys.argv[1]))["etcd3"]
other, forged, own = sys.argv[2], sys.argv[3], sys.argv[4]
host, port = section["hosts"][0].rsplit(":", 1)
context = ssl.create_default_context(cafile=section["cacert"])
context.load_cert_chain(section["cert"], section["key"])
b64 = lambda text: base64.b64encode(text.encode()).decode()

def call(path, body, token=""):
    conn = http.client.HTTPSConnection(host.strip("[]"), int(port), context=context, timeout=10)
    headers = {"Content-Type": "application/json", **({"Authorization": token} if token else {})}
    conn.request("POST", path, json.dumps(body), headers)
    answer = conn.getresponse()
    return [answer.status, answer.read().decode(errors="replace")]

token = ""
if section.get("username"):
    status, text = call("/v3/auth/authenticate", {"name": section["username"], "password": section["password"]})
    token = json.loads(text).get("token", "") if status == 200 else ""
everything = {"key": b64("\0"), "range_end": b64("\0"), "keys_only": True}
print(json.dumps({
    "list_with_certificate": call("/v3/kv/range", everything),
    "list_as_user": call("/v3/kv/range", everything, token),
    "write_other_with_certificate": call("/v3/kv/put", {"key": b64(other), "value": b64(forged)}),
    "write_other_as_user": call("/v3/kv/put", {"key": b64(other), "value": b64(forged)}, token),
    "write_own": call("/v3/kv/put", {"key": b64(own), "value": b64("mine")}, token),
    "read_own": call("/v3/kv/range", {"key": b64(own)}, token),
}))
"""


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[Cluster]:
    """The session's pair, named db-etcd for the module, after a reconciler round (its Patroni
    given its etcd user, authentication on), and another cluster's scope with a ``/config``."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-etcd") as cluster:
        with django_db_blocker.unblock():
            engine.put(etcd.client_urls(), OTHER_CONFIG, OTHER_VALUE, etcd.client_files())
            assert wait_for(lambda: _reconciled(cluster), TIMEOUT, interval=2)
        try:
            yield cluster
        finally:
            with django_db_blocker.unblock():
                etcd.delete_prefix(f"{NAMESPACE}{OTHER_SCOPE}/")
                etcd.delete_prefix(_own_key(cluster))


def _reconciled(cluster: Cluster) -> bool:
    """One reconciler round for the pair and the panel's etcd; whether nothing waits any more."""
    notes = ha.supervise(cluster) + ha.supervise_etcd()
    return not any("waits" in note for note in notes)


def _own_key(cluster: Cluster) -> str:
    return f"{NAMESPACE}{ha_files.scope(cluster)}/probe"


def _attack(cluster: Cluster) -> dict[str, list[Any]]:
    member = cluster.members.get(name="member-1")
    config = ha_files.member_config_path(cluster, member)
    done = as_user(
        isolation.os_user(cluster),
        "/usr/bin/python3",
        "-c",
        ATTACK,
        str(config),
        OTHER_CONFIG,
        FORGED,
        _own_key(cluster),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout))


def _etcdctl(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """etcd's own client over gRPC with the cluster's certificate and no user: etcd would take
    the certificate's common name as the user."""
    section = json.loads(
        ha_files.member_config_path(cluster, cluster.members.get(name="member-1")).read_text()
    )
    section = section["etcd3"]
    return as_user(
        isolation.os_user(cluster),
        "/usr/bin/etcdctl",
        f"--endpoints=https://{section['hosts'][0]}",
        f"--cacert={section['cacert']}",
        f"--cert={section['cert']}",
        f"--key={section['key']}",
        "--command-timeout=10s",
        *args,
    )


def test_a_clusters_etcd_credentials_read_and_write_nothing_of_another_clusters_scope(
    ha_cluster: Cluster,
) -> None:
    seen = _attack(ha_cluster)
    for name in (
        "list_with_certificate",
        "list_as_user",
        "write_other_with_certificate",
        "write_other_as_user",
    ):
        status, text = seen[name]
        assert status != 200, f"{name}: {text[:300]}"
        assert OTHER_SCOPE not in text
    listing = _etcdctl(ha_cluster, "get", "", "--prefix", "--keys-only")
    assert listing.returncode != 0 and OTHER_SCOPE not in listing.stdout, listing.stdout[-500:]
    forged = _etcdctl(ha_cluster, "put", OTHER_CONFIG, FORGED)
    assert forged.returncode != 0, forged.stdout
    assert engine.get(etcd.client_urls(), OTHER_CONFIG, etcd.client_files()) == OTHER_VALUE


def test_a_clusters_etcd_credentials_still_read_and_write_its_own_scope(ha_cluster: Cluster) -> None:
    seen = _attack(ha_cluster)
    assert seen["write_own"][0] == 200, seen["write_own"]
    assert seen["read_own"][0] == 200 and '"kvs"' in seen["read_own"][1], seen["read_own"]
    assert engine.get(etcd.client_urls(), _own_key(ha_cluster), etcd.client_files()) == "mine"


def _members_tagged(cluster: Cluster) -> list[bool]:
    """For each member key of the cluster's scope: whether it names the scope's etcd user."""
    prefix = f"{NAMESPACE}{ha_files.scope(cluster)}/members/"
    keys = engine.keys(etcd.client_urls(), prefix, etcd.client_files())
    return [
        json.loads(value).get("tags", {}).get(ETCD_USER_TAG) == ha_files.scope(cluster) for _, value in keys
    ]


def _as_an_older_panel_left_it(cluster: Cluster) -> None:
    """etcd's authentication off, each member's Patroni started without an etcd user (it never
    had a token) and with a client certificate that names a common name."""
    urls, tls = etcd.client_urls(), etcd.client_files()
    engine.call(urls, "/v3/auth/disable", {}, tls)
    user = isolation.os_user(cluster)
    files = ha_files.etcd_tls(cluster)
    assert cluster.node is not None
    before = etcd_lib.issue(etcd.authority(), f"{cluster.node.name} client", server=True)
    runas.write_private_file(Path(files.key), before.key_pem, owner=user)
    runas.write_private_file(Path(files.cert), before.cert_pem, owner=user)
    members = list(cluster.members.order_by("name"))
    for member in members:
        path = ha_files.member_config_path(cluster, member)
        config = json.loads(path.read_text())
        for name in ("username", "password"):
            config["etcd3"].pop(name)
        config["tags"].pop(ETCD_USER_TAG)
        runas.write_private_file(path, json.dumps(config), owner=user)
        patroni.stop_member(path)
    for member in members:
        path = ha_files.member_config_path(cluster, member)
        join = isolation.member_cgroup(cluster, member.name)
        log = ha_files.member_log_path(cluster, member)
        patroni.start_member(path, log, user, join, data_dir=member.data_dir)
    assert wait_for(lambda: _members_tagged(cluster) == [False, False], TIMEOUT, interval=1), _log_tails(
        cluster
    )
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)


def _log_tails(cluster: Cluster) -> str:
    """The end of each member's Patroni log, for a failure's message."""
    tails = []
    for member in cluster.members.all():
        lines = ha_files.member_log_path(cluster, member).read_text(errors="replace").splitlines()
        tails.append(f"{member.name}: " + "\n".join(lines[-15:]))
    return "\n".join(tails)


def _last_seen_etcd(member: ClusterMember) -> float:
    status, text = patroni.rest("GET", member.rest_port, "/patroni", timeout=3, host=member.host)
    return float(json.loads(text).get("dcs_last_seen") or 0) if status == 200 else 0.0


# Longer than Patroni's retry_timeout (5 s): a full run's loaded machine took that long to start
# etcd again, and the primary's Patroni, without etcd, demoted it (its PostgreSQL restarted).
SLOW_START = 8.0


def _slow_etcd_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """etcd's restart in the reconciler's round (stopped, then started by ``ensure_here``) takes
    SLOW_START seconds more; its starts in other rounds, with etcd running, do not."""
    real = etcd.ensure_here

    def slower(node: Any, timeout: float, **kwargs: Any) -> str | None:
        if engine.running_argv(etcd.data_dir()) is None:
            time.sleep(SLOW_START)
        return real(node, timeout, **kwargs)

    monkeypatch.setattr(etcd, "ensure_here", slower)


def test_running_patroni_moves_to_its_own_etcd_user_without_losing_its_primary(
    ha_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as_an_older_panel_left_it(ha_cluster)
    _slow_etcd_start(monkeypatch)
    urls, tls = etcd.client_urls(), etcd.client_files()
    assert not engine.auth_enabled(urls, tls)
    primary = _primary(ha_cluster)
    postmaster = primary.pid

    # The reconciler's rounds: users given and Patroni reloaded, etcd started again, then
    # authentication on.
    assert wait_for(lambda: _reconciled(ha_cluster) and engine.auth_enabled(urls, tls), TIMEOUT, interval=2)
    enabled_at = time.time()
    assert _members_tagged(ha_cluster) == [True, True]
    for member in ha_cluster.members.all():  # each Patroni reached etcd since, logged in
        assert wait_for(lambda m=member: _last_seen_etcd(m) > enabled_at, TIMEOUT, interval=1), member.name
    assert ha.wait_healthy(ha_cluster, TIMEOUT), ha.read_statuses(ha_cluster)
    still = _primary(ha_cluster)
    assert (still.name, still.pid) == (primary.name, postmaster)  # no failover, no restart
    # Patroni held in place for the restart only: its maintenance mode lifted again.
    status, text = patroni.rest("GET", still.rest_port, "/config", host=still.host)
    assert status == 200 and not json.loads(text).get("pause"), text
    assert _attack(ha_cluster)["write_other_as_user"][0] != 200


def _primary(cluster: Cluster) -> ClusterMember:
    ha.refresh_members(cluster)
    return cluster.members.get(role=MemberRole.PRIMARY)


def test_patroni_logged_in_as_the_clusters_own_user_fails_over(ha_cluster: Cluster) -> None:
    assert ha.wait_healthy(ha_cluster, TIMEOUT), ha.read_statuses(ha_cluster)
    section = json.loads(ha_files.member_config_path(ha_cluster, _primary(ha_cluster)).read_text())["etcd3"]
    assert section["username"] == ha_files.scope(ha_cluster)
    old = _primary(ha_cluster)
    patroni.kill_postmaster(int(old.pid or 0))

    def another_primary() -> bool:
        statuses = ha.read_statuses(ha_cluster)
        return any(s.is_primary and s.state == "running" and s.name != old.name for s in statuses)

    assert wait_for(another_primary, TIMEOUT, interval=0.5), ha.read_statuses(ha_cluster)
    # The new primary's Patroni wrote the leader key in its scope, logged in as its own user.
    leader = f"{NAMESPACE}{ha_files.scope(ha_cluster)}/leader"
    assert engine.get(etcd.client_urls(), leader, etcd.client_files()) != old.name
    # The old primary comes back as a standby (its Patroni supervised).
    assert wait_for(lambda: _reconciled(ha_cluster) and ha.wait_healthy(ha_cluster, 2), TIMEOUT, interval=1)
