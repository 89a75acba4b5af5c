"""A member's Patroni follows the panel's etcd members: when the rows name other members than its
configuration, the reconciler's ``ha_files.follow_etcd`` rewrites its ``etcd3`` section (every
member, https, the cluster's own copy of the client certificate, 0600) and sends its Patroni
SIGHUP; when nothing changed it leaves the file and the process alone. The Patroni here is a
stand-in process found, as Patroni is, by its configuration file on its command line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth.models import User

from panel import crypto
from panel.clusters.models import ClusterMember, EtcdMember, EtcdMemberState
from panel.clusters.services import nodes
from panel.clusters.standbys.services import ha_files
from panel.clusters.tests.conftest import make_cluster_row

# Says "reloaded" in the marker file on SIGHUP, as Patroni reads its configuration again then.
STAND_IN = """
import signal, sys, time
signal.signal(signal.SIGHUP, lambda *_: open(sys.argv[2], "a").write("reloaded\\n"))
time.sleep(60)
"""


def test_a_members_configuration_follows_the_etcd_members_and_patroni_is_reloaded(
    owner: User, db: None, wait_until: Callable[..., object]
) -> None:
    node = nodes.this_node()
    cluster = make_cluster_row(
        owner,
        num_nodes=2,
        node=node,
        plan_slug="db-s-1vcpu-2gb",
        superuser_password_encrypted=crypto.encrypt("not-used-here"),
    )
    member = ClusterMember.objects.create(
        cluster=cluster, name="member-1", node=node, port=26950, rest_port=26951, data_dir=str(cluster.pgdata)
    )
    # Only these rows (an earlier module's real etcd may have left this node's row; rolled back).
    EtcdMember.objects.all().delete()
    for index, name in enumerate(("node-x", "node-y", "node-z")):
        EtcdMember.objects.create(
            name=name,
            host=f"10.0.0.{index + 1}",
            client_port=25258,
            peer_port=25259,
            state=EtcdMemberState.RUNNING,
        )
    EtcdMember.objects.create(name="node-w", host="10.0.0.9", client_port=25258, peer_port=25259)  # joining
    config = ha_files.member_config_path(cluster, member)
    config.parent.mkdir(parents=True, exist_ok=True)
    before = {"etcd3": {"hosts": ["10.0.0.1:25258"], "protocol": "https"}, "scope": ha_files.scope(cluster)}
    config.write_text(json.dumps(before))
    marker = config.with_name("sighup")
    patroni = subprocess.Popen([sys.executable, "-c", STAND_IN, str(config), str(marker)])
    try:
        wait_until(lambda: ha_files.patroni.member_pid(config) == patroni.pid, timeout=10)
        note = ha_files.follow_etcd(cluster, member)
        assert note is not None and "10.0.0.3:25258" in note
        section = json.loads(config.read_text())["etcd3"]
        tls = ha_files.etcd_tls(cluster)
        assert section == {
            "hosts": ["10.0.0.1:25258", "10.0.0.2:25258", "10.0.0.3:25258"],  # not the learner
            "protocol": "https",
            "cacert": tls.ca,
            "cert": tls.cert,
            "key": tls.key,
            "username": ha_files.scope(cluster),  # its own etcd user (standbys/services/etcd_auth.py)
            "password": tls.password,
        }
        for path in (tls.ca, tls.cert, tls.key):
            assert Path(path).stat().st_mode & 0o777 == 0o600
        assert "PRIVATE KEY" in Path(tls.key).read_text()
        wait_until(
            lambda: marker.exists() and marker.read_text() == "reloaded\n", timeout=10, message="SIGHUP"
        )

        # Nothing changed: the file stays as it is, no signal.
        written = config.stat().st_mtime_ns
        assert ha_files.follow_etcd(cluster, member) is None
        assert config.stat().st_mtime_ns == written and marker.read_text() == "reloaded\n"
    finally:
        patroni.kill()
        patroni.wait(timeout=10)
        shutil.rmtree(cluster.data_root, ignore_errors=True)
