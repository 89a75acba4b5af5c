"""The pure parts of high availability: Patroni's configuration, its ``/cluster`` answer read
into member states (a real answer of Patroni 4.1.5 here), HAProxy's configuration, and the
callback's repointing of pgbouncer.ini."""

from __future__ import annotations

import dataclasses
import importlib
import json
import time

import pytest

from panel.clusters.standbys.engine.patroni_callback import repoint
from panel.clusters.standbys.lib import haproxy, patroni
from panel.clusters.tests.conftest import ha_cluster

# GET /cluster of a three-member cluster right after a failover (Patroni 4.1.5, this machine).
CLUSTER_ANSWER = (
    '{"members": [{"name": "member-1", "role": "sync_standby", "state": "streaming", "api_url": '
    '"http://127.0.0.1:27003/patroni", "host": "127.0.0.1", "port": 27002, "timeline": 4, "receive_lag": 0, '
    '"receive_lsn": "0/7046198", "replay_lag": 0, "replay_lsn": "0/7046198", "lag": 0, "lsn": "0/7046198"}, '
    '{"name": "member-2", "role": "replica", "state": "stopped", "api_url": "http://127.0.0.1:27005/patroni", '
    '"host": "127.0.0.1", "port": 27004, "lag": "unknown"}, '
    '{"name": "member-3", "role": "leader", "state": "running", "api_url": "http://127.0.0.1:27007/patroni", '
    '"host": "127.0.0.1", "port": 27006, "timeline": 4}], "scope": "cluster-e57cb8e3fc34461889f5832ec42539d3"}'
)


def _cluster(members: int) -> patroni.HaCluster:
    return ha_cluster(
        members=tuple(
            patroni.Member(f"member-{i}", 27000 + 2 * i, 27001 + 2 * i, f"/d/{i}") for i in range(members)
        )
    )


def test_it_reads_roles_states_lag_and_timeline():
    statuses = patroni.parse_cluster(CLUSTER_ANSWER)
    assert [(s.name, s.role, s.state, s.lag_bytes, s.timeline, s.sync) for s in statuses] == [
        ("member-1", "standby", "streaming", 0, 4, True),
        ("member-2", "standby", "stopped", None, None, False),
        ("member-3", "primary", "running", 0, 4, False),
    ]


def test_strict_synchronous_mode_only_with_three_members():
    assert patroni.dynamic_config(_cluster(3))["synchronous_mode_strict"] is True
    two = patroni.dynamic_config(_cluster(2))
    assert two["synchronous_mode_strict"] is False and two["synchronous_mode"] is True
    assert (two["ttl"], two["loop_wait"], two["primary_start_timeout"]) == (20, 1, 0)
    assert two["postgresql"]["use_pg_rewind"] is True
    assert two["postgresql"]["parameters"]["max_connections"] == 50


def test_a_member_configuration_is_json_patroni_reads_as_yaml():
    text = patroni.render_member(_cluster(3), _cluster(3).members[1], "/data/ha/member-1.pgpass")
    config = json.loads(text)
    assert config["name"] == "member-1" and config["scope"] == "cluster-x"
    assert config["postgresql"]["listen"] == "127.0.0.1:27002"
    assert config["restapi"]["listen"] == "127.0.0.1:27003"
    assert config["postgresql"]["custom_conf"] == "/data/ha/postgresql.base.conf"
    assert config["postgresql"]["parameters"]["hba_file"] == "/data/pgdata/pg_hba.conf"


def test_haproxy_checks_every_member_for_the_primary():
    text = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid")
    assert "bind 127.0.0.1:26000" in text
    assert "option httpchk GET /primary" in text
    assert "server member-0 127.0.0.1:27000 source 127.0.5.1 check port 27001" in text
    assert "server member-1 127.0.0.1:27002 source 127.0.5.1 check port 27003" in text
    assert haproxy.haproxy_binds("*") == ["0.0.0.0"]
    assert haproxy.haproxy_binds("127.0.0.1, ::1") == ["127.0.0.1", "[::1]"]


def test_the_callback_repoints_only_lines_on_the_clusters_socket():
    ini = (
        "[databases]\n"
        "writes = host=/data/run port=27002 dbname=defaultdb pool_size=5 pool_mode=transaction\n"
        "other = host=/elsewhere port=27002 dbname=x\n"
        "[pgbouncer]\nlisten_port = 26001\n"
    )
    new = repoint(ini, "/data/run", 27006)
    assert "writes = host=/data/run port=27006 dbname=defaultdb" in new
    assert "other = host=/elsewhere port=27002" in new
    assert "listen_port = 26001" in new


def test_a_member_streams_from_another_only_when_a_switchover_cascades_it():
    plain = json.loads(patroni.render_member(_cluster(3), _cluster(3).members[2], "/p"))
    assert plain["tags"] == {}
    cascaded = dataclasses.replace(_cluster(3).members[2], replicate_from="member-1")
    config = json.loads(patroni.render_member(_cluster(3), cascaded, "/p"))
    assert config["tags"] == {"replicatefrom": "member-1"}


def test_commits_wait_for_a_standby_to_apply_them():
    parameters = patroni.dynamic_config(_cluster(3))["postgresql"]["parameters"]
    assert parameters["synchronous_commit"] == "remote_apply"


def test_haproxy_drops_a_demoted_member_after_one_failed_half_second_check():
    text = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid")
    assert "default-server inter 500ms fall 1 rise 1 on-marked-down shutdown-sessions" in text


def test_haproxy_retries_a_refused_connection_on_another_member_within_half_a_second():
    """A switchover stops the old primary before its check says so: a direct client's connection
    to it is refused and retried after min(timeout connect, 1 s), on another server each time.
    With ``timeout connect 3s`` and no redispatch a direct client waited 3.4 s (failover.py)."""
    lines = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid").splitlines()
    defaults = lines[lines.index("defaults") : lines.index("listen primary")]
    assert "    timeout connect 500ms" in defaults
    assert "    retries 3" in defaults
    assert "    option redispatch 1" in defaults


def test_patroni_runs_with_a_100_ms_stop_poll(monkeypatch):
    import patroni.__main__
    import patroni.postgresql

    ha = importlib.import_module("patroni.ha")

    from panel.clusters.standbys.engine import patroni_run

    seen = []
    monkeypatch.setattr(patroni.postgresql, "STOP_POLLING_INTERVAL", 1)  # Patroni 4.1.5's own
    monkeypatch.setattr(
        patroni.__main__, "main", lambda: seen.append(patroni.postgresql.STOP_POLLING_INTERVAL)
    )
    monkeypatch.setattr("sys.argv", ["patroni_run.py", "/data/ha/member-1.json"])
    monkeypatch.setattr(ha, "time", time)  # restored after the test
    patroni_run.main()
    assert seen == [0.1]
    assert isinstance(ha.time, patroni_run.DemoteClock)


def test_patroni_still_sleeps_a_second_before_asking_whether_a_standby_can_take_over():
    # What DemoteClock replaces, as Patroni 4.1.5 writes it: an upgrade that changes it must fail here.
    import inspect

    import patroni.postgresql  # noqa: F401 - before patroni.ha, or its imports circle

    source = inspect.getsource(importlib.import_module("patroni.ha").Ha.demote)
    shutdown = source[source.index("def on_shutdown(checkpoint_location") :]
    sleep_at = shutdown.index("time.sleep(1)")
    assert shutdown.index("self.is_failover_possible(cluster_lsn=checkpoint_location)") > sleep_at


def test_the_demote_wait_ends_as_soon_as_a_standby_can_take_over():
    from panel.clusters.standbys.engine.patroni_run import DemoteClock

    class Ha:
        def __init__(self):
            self.asked: list[int] = []

        def is_failover_possible(self, *, cluster_lsn):
            self.asked.append(cluster_lsn)
            return len(self.asked) == 3

        def demote(self):  # Patroni's shape: on_shutdown sees ``self`` from the method around it
            def on_shutdown(checkpoint_location, prev_location):
                DemoteClock().sleep(1)
                return self.asked

            return on_shutdown

    assert Ha().demote()(0x3000060, 0x3000028) == [0x3000060] * 3


def test_other_sleeps_and_a_standby_that_never_catches_up_keep_patronis_wait():
    from panel.clusters.standbys.engine.patroni_run import DemoteClock

    class Ha:
        asked = 0

        def is_failover_possible(self, *, cluster_lsn):
            Ha.asked += 1
            return False

        def demote(self):
            def on_shutdown(checkpoint_location, prev_location):
                started = time.monotonic()
                DemoteClock().sleep(1)
                return self.asked, time.monotonic() - started

            return on_shutdown

    asked, waited = Ha().demote()(1, 0)
    assert waited >= 1  # the whole second, asked many times meanwhile
    assert asked > 3

    def demote():
        started = time.monotonic()
        DemoteClock().sleep(0.2)
        return time.monotonic() - started

    asked = Ha.asked
    assert demote() >= 0.2
    assert Ha.asked == asked  # a sleep anywhere else is Patroni's own
    assert DemoteClock().monotonic is time.monotonic


def test_members_hold_their_stop_for_a_switchover_only_when_told():
    config = json.loads(
        patroni.render_member(
            dataclasses.replace(_cluster(2), before_stop="python hold.py /data/run"),
            _cluster(2).members[0],
            "/p",
        )
    )
    assert config["postgresql"]["before_stop"] == "python hold.py /data/run"
    assert (
        "before_stop"
        not in json.loads(patroni.render_member(_cluster(2), _cluster(2).members[0], "/p"))["postgresql"]
    )


def test_the_before_stop_script_waits_for_the_pools_only_during_a_switchover(tmp_path):
    import subprocess
    import sys
    import time

    from panel.clusters.standbys.engine import patroni_before_stop as hold

    argv = [sys.executable, "-I", hold.__file__, str(tmp_path)]
    started = time.monotonic()
    assert subprocess.run(argv, timeout=10).returncode == 0  # an ordinary stop: at once
    assert not (tmp_path / hold.STOPPING).exists()
    (tmp_path / hold.PENDING).write_text("switchover\n")
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while not (tmp_path / hold.STOPPING).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (tmp_path / hold.STOPPING).exists()
    time.sleep(0.3)
    assert proc.poll() is None, "the stop went on before the pools were paused"
    (tmp_path / hold.PENDING).unlink()
    assert proc.wait(timeout=5) == 0
    assert time.monotonic() - started < hold.WAIT


def test_standbys_come_from_the_repository_when_there_is_one():
    plain = patroni.member_config(_cluster(2), patroni.Member("member-2", 27004, 27005, "/d/m 2"), "/p")
    assert plain["postgresql"]["create_replica_methods"] == ["basebackup"]
    assert "pgbackrest" not in plain["postgresql"] and "recovery_conf" not in plain["postgresql"]

    repository = ("/usr/bin/pgbackrest", "--config=/b/x/pgbackrest.conf", "--stanza=main")
    with_repo = patroni.HaCluster(**{**_cluster(2).__dict__, "repository": repository})
    conf = patroni.member_config(with_repo, patroni.Member("member-2", 27004, 27005, "/d/m 2"), "/p")[
        "postgresql"
    ]
    assert conf["create_replica_methods"] == ["pgbackrest", "basebackup"]
    assert conf["pgbackrest"] == {
        "command": "/usr/bin/pgbackrest --config=/b/x/pgbackrest.conf --stanza=main '--pg1-path=/d/m 2' "
        "--delta restore",
        "keep_data": True,
        "no_params": True,
    }
    assert conf["recovery_conf"]["restore_command"].endswith("'--pg1-path=/d/m 2' archive-get %f %p")


def test_every_members_rest_api_asks_for_the_clusters_credentials():
    cluster = _cluster(3)
    for member in cluster.members:
        config = json.loads(patroni.render_member(cluster, member, "/d/pgpass"))
        assert config["restapi"]["authentication"] == {
            "username": "panel-1a2b3c4d",
            "password": "rest-secret",
        }


@pytest.mark.parametrize("fields", [{"rest_password": ""}, {"rest_username": ""}, {"rest_username": "a:b"}])
def test_a_member_without_usable_rest_credentials_is_not_written(fields):
    cluster = patroni.HaCluster(**{**_cluster(2).__dict__, **fields})
    with pytest.raises(ValueError):
        patroni.render_member(cluster, cluster.members[0], "/d/pgpass")


def test_replication_and_rewind_show_the_members_certificate():
    """The members' lines for another node's address ask for it (``lib.member_tls``)."""
    files = {
        "member_sslcert": "/d/ha/member-client.crt",
        "member_sslkey": "/d/ha/member-client.key",
        "member_ssl_ca": "/d/ha/members-ca.crt",
    }
    cluster = patroni.HaCluster(**{**_cluster(2).__dict__, **files})
    postgresql = json.loads(patroni.render_member(cluster, cluster.members[1], "/d/pgpass"))["postgresql"]
    auth = postgresql["authentication"]
    # Every member trusts the member CA from a file of its node, not its data directory's copy.
    assert postgresql["parameters"]["ssl_ca_file"] == "/d/ha/members-ca.crt"
    for kind in ("replication", "rewind"):
        assert auth[kind]["sslcert"] == "/d/ha/member-client.crt"
        assert auth[kind]["sslkey"] == "/d/ha/member-client.key"
    assert "sslcert" not in auth["superuser"]  # over the socket, by peer authentication
