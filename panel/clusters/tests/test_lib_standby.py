"""The replica's parts of the server configuration (pure): standby.conf, its conninfo, the
source's pg_hba lines for the panel's replication role."""

from __future__ import annotations

import pytest

from panel.clusters.lib.pgconf import render_hba, render_standby_conf, standby_conninfo


def test_the_conninfo_quotes_every_value_and_never_holds_a_password() -> None:
    text = standby_conninfo({"host": "127.0.0.1", "port": 26002, "passfile": "/d/it's\\here"})
    assert text == "host='127.0.0.1' port='26002' passfile='/d/it\\'s\\\\here'"
    with pytest.raises(ValueError, match="never a password"):
        standby_conninfo({"host": "127.0.0.1", "password": "secret"})


def test_standby_conf_names_the_source_and_the_slot() -> None:
    text = render_standby_conf("host='127.0.0.1' user='r'", "pgpanel_replica_ab12")
    assert "primary_conninfo = 'host=''127.0.0.1'' user=''r'''\n" in text
    assert "primary_slot_name = 'pgpanel_replica_ab12'\n" in text and "hot_standby = on\n" in text
    assert "wal_retrieve_retry_interval = '500ms'\n" in text
    for bad in ("Slot", "a-b", "x'; drop", ""):
        with pytest.raises(ValueError):
            render_standby_conf("host=x", bad)


def test_the_replication_role_streams_from_loopback_only_and_logs_in_nowhere() -> None:
    lines = render_hba("pgpanel", "pgpanel_monitor", ["203.0.113.0/24"], "pgpanel_replication").splitlines()
    replication = [line for line in lines if "pgpanel_replication" in line]
    assert replication == [
        "hostssl replication  pgpanel_replication  127.0.0.1/32  scram-sha-256",
        "hostssl replication  pgpanel_replication  ::1/128  scram-sha-256",
        "host    all       pgpanel_replication  all  reject",
        "host    all,replication  pgpanel,pgpanel_monitor,pgpanel_replication  all  reject",
    ]
    # Before every line that lets clients in.
    assert lines.index(replication[-1]) < min(
        i for i, line in enumerate(lines) if line.startswith("hostssl all")
    )
    alone = render_hba("pgpanel", "pgpanel_monitor").splitlines()
    assert not [line for line in alone if "replication" in line and not line.endswith("reject")]
