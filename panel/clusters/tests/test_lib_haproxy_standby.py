"""HAProxy's read-only port (standby_connection): round-robin over the members Patroni's
``GET /replica`` calls standbys, the primary as a backup server; HAProxy itself accepts the file."""

from __future__ import annotations

import subprocess
from pathlib import Path

from panel.clusters.standbys.engine.patroni import HAPROXY
from panel.clusters.standbys.lib import haproxy
from panel.clusters.tests.test_lib_patroni import _cluster


def test_the_standby_port_balances_over_replicas_with_the_primary_as_backup():
    text = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid", 26005)
    primary, _sep, standby = text.partition("listen standby")
    assert "bind 127.0.0.1:26005" in standby and "26005" not in primary
    assert "balance roundrobin" in standby
    assert "option httpchk GET /replica" in standby
    assert "on-marked-up shutdown-backup-sessions" in standby
    assert "server member-0 127.0.0.1:27000 source 127.0.5.1 check port 27001" in standby
    # Every member may be the primary: each one is a backup that follows the primary's check.
    assert "server member-0-primary 127.0.0.1:27000 source 127.0.5.1 backup track primary/member-0" in standby
    assert "server member-1-primary 127.0.0.1:27002 source 127.0.5.1 backup track primary/member-1" in standby


def test_without_a_standby_port_there_is_no_standby_section():
    text = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid")
    assert "listen standby" not in text and "/replica" not in text


def test_haproxy_accepts_the_configuration(tmp_path: Path):
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(3), str(tmp_path / "haproxy.pid"), 26005)
    )
    check = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr + check.stdout
    # And refuses a file whose backup tracks a server that does not exist: the check is real.
    config.write_text(config.read_text().replace("track primary/member-0", "track primary/nobody"))
    bad = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0


def test_the_floating_address_is_bound_at_the_clusters_ports_on_any_node(tmp_path: Path):
    """An entry on another node listens on ports of its own; the floating address is reached at
    the cluster's, bound freely (not on this node until its member leads): HAProxy takes it."""
    floating = ("198.18.0.250", 26000, 26005)
    text = haproxy.render_haproxy(["127.0.0.1"], 26010, _cluster(2), "/data/ha/haproxy.pid", 26011, floating)
    primary, _sep, standby = text.partition("listen standby")
    assert "bind 198.18.0.250:26000 transparent" in primary and "bind 127.0.0.1:26010" in primary
    assert "bind 198.18.0.250:26005 transparent" in standby and "bind 127.0.0.1:26011" in standby
    config = tmp_path / "haproxy.cfg"
    config.write_text(text.replace("/data/ha/haproxy.pid", str(tmp_path / "haproxy.pid")))
    check = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr + check.stdout
