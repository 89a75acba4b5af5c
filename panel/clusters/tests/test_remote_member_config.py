"""Members on several nodes, the pure parts: each member listens and is checked at its node's
address, and a member on another node gets the primary's path-bearing settings with its own
node's data directory (``node.conf``)."""

from __future__ import annotations

import json

from panel.clusters.standbys.lib import haproxy, patroni
from panel.clusters.standbys.services.remote_members import MemberFiles, node_conf
from panel.clusters.tests.conftest import ha_cluster


def _spread() -> patroni.HaCluster:
    return ha_cluster(
        etcd_hosts=("10.0.0.1:2379",),
        members=(
            patroni.Member("member-1", 27000, 27001, "/a/pgdata", "10.0.0.1"),
            patroni.Member("member-2", 27000, 27001, "/b/members/member-2", "10.0.0.2"),
        ),
        hba_file="/data/auth/pg_hba.conf",
        ident_file="/data/auth/pg_ident.conf",
    )


def test_members_on_other_nodes_listen_and_are_checked_at_their_nodes_address():
    cluster = _spread()
    config = json.loads(patroni.render_member(cluster, cluster.members[1], "/b/ha/member-2.pgpass"))
    assert config["postgresql"]["listen"] == "10.0.0.2:27000"
    assert config["postgresql"]["connect_address"] == "10.0.0.2:27000"
    assert config["restapi"]["connect_address"] == "10.0.0.2:27001"
    assert config["etcd3"]["hosts"] == ["10.0.0.1:2379"]
    text = haproxy.render_haproxy(["0.0.0.0"], 26000, cluster, "/a/ha/haproxy.pid")
    assert "server member-1 10.0.0.1:27000 check port 27001" in text
    assert "server member-2 10.0.0.2:27000 check port 27001" in text


def test_node_conf_names_this_nodes_paths_for_the_primarys_path_settings(settings):
    settings.PANEL_DATA_DIR = "/srv/b"
    panel_conf = "\n".join(
        [
            "port = 27000",
            "log_directory = '/srv/a/clusters/x/log'",
            "shared_preload_libraries = '/srv/a/lib/15/pgpanel_guard.so,pg_stat_statements'",
            "include_if_exists = 'quota.conf'",
            "unix_socket_directories = '/srv/a/clusters/x/run'",
        ]
    )
    files = MemberFiles(
        base_conf="",
        panel_conf=panel_conf,
        panel_conf_path="/srv/a/clusters/x/pgdata/panel.conf",
        source_data_dir="/srv/a",
    )
    lines = node_conf(files).splitlines()
    assert lines[1:] == [
        "log_directory = '/srv/b/clusters/x/log'",
        "shared_preload_libraries = '/srv/b/lib/15/pgpanel_guard.so,pg_stat_statements'",
        "unix_socket_directories = '/srv/b/clusters/x/run'",
    ]
    # Settings naming no path of the cluster's node are the copied panel.conf's alone.
    assert not any(line.startswith(("port", "include")) for line in lines)
