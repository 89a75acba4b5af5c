"""Trusted sources on a cluster with standbys (pure parts): HAProxy refuses a client whose own
address is not a source on every listen section, reading the sources from a pattern file; with
no file it lets nobody in; pg_hba.conf behind it lets only HAProxy's address in over TCP, whatever
the sources. HAProxy itself reads the files (``haproxy -c``), and refuses a missing sources file."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from panel.clusters.lib import firewall
from panel.clusters.lib.pgconf import render_hba
from panel.clusters.standbys.engine.patroni import HAPROXY
from panel.clusters.standbys.lib import haproxy
from panel.clusters.tests.test_lib_patroni import _cluster

SOURCES = "/data/ha/trusted_sources.lst"
RULE = f"tcp-request connection reject unless {{ src -f {SOURCES} }}"


def _sections(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    for block in text.split("\nlisten ")[1:]:
        name, _nl, body = block.partition("\n")
        sections[name] = body
    return sections


def test_every_listen_section_refuses_addresses_outside_the_sources_file() -> None:
    cluster = dataclasses.replace(_cluster(2), haproxy_sources=SOURCES)
    text = haproxy.render_haproxy(["127.0.0.1", "[::1]"], 26000, cluster, "/data/ha/haproxy.pid", 26005)
    sections = _sections(text)
    assert set(sections) == {"primary", "standby"}
    for body in sections.values():
        assert body.count(RULE) == 1
        # Right after the binds, before anything is forwarded.
        lines = [line.strip() for line in body.splitlines()]
        assert lines.index(RULE) == 2 and all(line.startswith("bind ") for line in lines[:2])


def test_without_a_sources_file_nobody_is_let_in() -> None:
    text = haproxy.render_haproxy(["127.0.0.1"], 26000, _cluster(2), "/data/ha/haproxy.pid", 26005)
    for body in _sections(text).values():
        assert "    tcp-request connection reject\n" in body and "unless" not in body


def test_a_sources_path_that_haproxy_would_split_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be written"):
        haproxy.render_haproxy(
            ["127.0.0.1"], 26000, dataclasses.replace(_cluster(2), haproxy_sources="/a b }"), "/p"
        )


def test_the_pattern_file_holds_the_sources_or_every_address() -> None:
    text = firewall.render_haproxy_sources(["203.0.113.7", "2001:db8::/32"])
    # The machine itself (read-only replicas stream through HAProxy) beside them.
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "203.0.113.7/32",
        "2001:db8::/32",
        "127.0.0.1/32",
    ]
    once = firewall.render_haproxy_sources(["127.0.0.1"])
    assert [line for line in once.splitlines() if not line.startswith("#")] == ["127.0.0.1/32"]
    everyone = firewall.render_haproxy_sources([])
    assert [line for line in everyone.splitlines() if not line.startswith("#")] == ["0.0.0.0/0", "::/0"]


def test_haproxy_reads_the_sources_file_and_refuses_a_missing_one(tmp_path: Path) -> None:
    sources = tmp_path / haproxy.HAPROXY_SOURCES
    sources.write_text(firewall.render_haproxy_sources(["127.0.0.2", "2001:db8::/32"]))
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        haproxy.render_haproxy(
            ["127.0.0.1"],
            26000,
            dataclasses.replace(_cluster(2), haproxy_sources=str(sources)),
            str(tmp_path / "haproxy.pid"),
            26005,
        )
    )
    check = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr + check.stdout
    sources.unlink()  # fail closed: HAProxy does not start (nor reload) without its sources
    missing = subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert missing.returncode != 0 and haproxy.HAPROXY_SOURCES in missing.stdout + missing.stderr


def _tcp_client_addresses(text: str) -> list[str]:
    return [
        line.split()[3]
        for line in text.splitlines()
        if line.startswith(("hostssl all ", "host    all       all "))
    ]


def test_behind_haproxy_postgres_lets_only_haproxys_address_in_whatever_the_sources() -> None:
    for sources in ([], ["203.0.113.7"], ["127.0.0.2"]):
        text = render_hba(
            "pgpanel", "pgpanel_monitor", sources, "pgpanel_replication", members_from=["127.0.0.1"]
        )
        assert set(_tcp_client_addresses(text)) == {"127.0.0.1/32"}, sources
        # The replication and superuser rules are as they were.
        assert "host    replication  pgpanel  127.0.0.1/32  scram-sha-256" in text
        assert "hostssl replication  pgpanel_replication  127.0.0.1/32  scram-sha-256" in text
        assert "host    all       pgpanel  all  reject" in text
    # A one-member cluster: PostgreSQL sees the client's own address and applies the sources.
    alone = render_hba("pgpanel", "pgpanel_monitor", ["203.0.113.7"], "pgpanel_replication")
    assert set(_tcp_client_addresses(alone)) == {"203.0.113.7/32"}
    assert set(_tcp_client_addresses(render_hba("pgpanel", "pgpanel_monitor"))) == {"all"}
