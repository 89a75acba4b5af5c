"""PgBouncer's hba file and the settings that load it (pure unit tests)."""

from __future__ import annotations

import pytest

from panel.pools.lib import pgbouncer_hba
from panel.pools.lib.pgbouncer_ini import ConfigError, render
from panel.pools.lib.pgbouncer_spec import ServerTarget
from panel.pools.tests.test_lib_pgbouncer_ini import make_globals

TARGET = ServerTarget("/var/lib/pgpanel/clusters/x/run", 25060)


def _rules(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line and not line.startswith("#")]


def test_without_sources_tls_clients_come_from_anywhere():
    assert _rules(pgbouncer_hba.render([])) == [
        ["local", "all", "all", "scram-sha-256"],
        ["hostssl", "all", "all", "0.0.0.0/0", "scram-sha-256"],
        ["hostssl", "all", "all", "::/0", "scram-sha-256"],
    ]


def test_with_sources_only_they_have_a_tcp_line():
    rules = _rules(pgbouncer_hba.render(["203.0.113.7", "2001:db8::/32"]))
    assert rules == [
        ["local", "all", "all", "scram-sha-256"],
        ["hostssl", "all", "all", "203.0.113.7/32", "scram-sha-256"],
        ["hostssl", "all", "all", "2001:db8::/32", "scram-sha-256"],
    ]


def test_the_ini_names_the_hba_file_with_auth_type_hba():
    ini = render(make_globals(auth_type="hba", auth_hba_file="/data/pgbouncer_hba.conf"), TARGET, [])
    assert "auth_type = hba\n" in ini
    assert "auth_hba_file = /data/pgbouncer_hba.conf\n" in ini


def test_the_ini_without_hba_has_no_hba_file():
    assert "auth_hba_file" not in render(make_globals(), TARGET, [])


@pytest.mark.parametrize(
    "changes",
    [
        {"auth_type": "hba"},
        {"auth_hba_file": "/data/pgbouncer_hba.conf"},
        {"auth_type": "hba", "auth_hba_file": "relative/hba.conf"},
    ],
)
def test_hba_and_its_file_go_together(changes):
    with pytest.raises(ConfigError):
        render(make_globals(**changes), TARGET, [])
