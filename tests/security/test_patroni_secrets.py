"""No file the OS user of a cluster with standbys can read holds the panel superuser's password
(issue 37, item 1, the file half), replayed for real on the session's two-member cluster.

The attack (before the fix): every member's Patroni configuration named the panel's superuser
with its password for Patroni's local, replication and rewind logins, and Patroni's passfile held
it too, all owned by the cluster's OS user: whatever the server runs could read them.

Now Patroni logs in locally as the superuser over the socket by peer authentication, and the
members stream and rewind as a role of their own (``settings.PANEL_MEMBER_ROLE``): every file the
cluster's OS user may read under the cluster's directories is scanned, none holds the password.
Beside it: both members stream and a switchover works (``test_panel_roles_port``), and files of
an earlier panel are brought over by the reconciler, the standby streaming again afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from panel.backups.engine import runner as engine
from panel.clusters.engine import dbconn, isolation
from panel.clusters.models import Cluster, credentials
from panel.clusters.services import reconciler
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import ha, ha_files, ha_roles
from panel.core import runas
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner
from tests.security.test_backup_secrets import _files_holding, _named_by_settings

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "pts-owner"
TIMEOUT = 120


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[Cluster]:
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-pts") as cluster:
        yield cluster


def _roots(cluster: Cluster) -> list[Any]:
    return [
        cluster.data_root,
        ha_files.ha_dir(cluster),
        engine.paths(cluster).root,
        *[ha_files.member_config_path(cluster, m).parent for m in ha_files.members_of(cluster)],
        *_named_by_settings(cluster),
    ]


def _streaming(cluster: Cluster) -> int:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE state = 'streaming' AND usename = %s",
            [settings.PANEL_MEMBER_ROLE],
        ).fetchone()
    return int(row[0]) if row else 0


def test_no_file_of_the_members_holds_the_superuser_password(ha_cluster: Cluster, wait_until: Any) -> None:
    cluster = ha_cluster
    assert (
        _files_holding(credentials.superuser_password(cluster), _roots(cluster), isolation.os_user(cluster))
        == []
    )
    wait_until(lambda: _streaming(cluster) == 1, timeout=TIMEOUT, message="the standby streams as its role")


def test_the_reconciler_moves_an_earlier_panels_files_off_the_password(
    ha_cluster: Cluster, wait_until: Any
) -> None:
    """Patroni files as an earlier panel wrote them (the superuser with its password for every
    login, and in the passfile): the reconciler's pass writes them anew and each Patroni reads them
    again; the standby streams as the members' role, no file holds the password."""
    cluster = ha_cluster
    user = isolation.os_user(cluster)
    auth = {"username": settings.PANEL_SUPERUSER, "password": credentials.superuser_password(cluster)}
    for member in ha_files.members_of(cluster):
        path = ha_files.member_config_path(cluster, member)
        config = json.loads(path.read_text())
        config["postgresql"].pop("use_unix_socket", None)
        config["postgresql"]["authentication"] = {"superuser": auth, "replication": auth, "rewind": auth}
        runas.write_private_file(path, json.dumps(config, indent=2) + "\n", owner=user)
        passfile = ha_files.ha_dir(cluster) / f"{member.name}.pgpass"
        line = f"*:*:*:{settings.PANEL_SUPERUSER}:{credentials.superuser_password(cluster)}\n"
        runas.write_private_file(passfile, line, owner=user)
        patroni.reload_member(path)
    assert _files_holding(credentials.superuser_password(cluster), _roots(cluster), user) != []

    note = (
        f"{cluster.name}: Patroni logs in by peer authentication and streams as {settings.PANEL_MEMBER_ROLE}"
    )
    # A round changes members only while each one's Patroni says it runs and streams: right after
    # the reload above a standby may be reconnecting, and that round leaves it to the next one.
    wait_until(lambda: note in reconciler.reconcile(), timeout=TIMEOUT, message="a round rewrites them")
    # A Patroni writes its passfile from the configuration it runs with: one may write the old one
    # once more before it reads the new file, and a later round moves it again. Until one finds
    # nothing to do:
    wait_until(
        lambda: (
            note not in reconciler.reconcile()
            and _files_holding(credentials.superuser_password(cluster), _roots(cluster), user) == []
        ),
        timeout=TIMEOUT,
        message="a round finds every file moved off the password",
    )
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    wait_until(lambda: _streaming(cluster) == 1, timeout=TIMEOUT, message="the standby streams as its role")


def _load_times(cluster: Cluster) -> dict[str, object]:
    """When each member's server last read its configuration files."""
    times = {}
    for member in ha_files.members_of(cluster):
        with dbconn.admin_connection(cluster, port=int(member.port)) as conn:
            row = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()
        times[member.name] = row[0] if row else None
    return times


def _settled_load_times(cluster: Cluster) -> dict[str, object]:
    """``_load_times`` once no reload is under way: the same over two of Patroni's loops (a loan's
    set-up may leave one pending, which a member's Patroni does at its next loop: met in a full
    run, a second into the round this test judges)."""
    last, steady_since = _load_times(cluster), time.monotonic()
    deadline = steady_since + 30
    while time.monotonic() - steady_since < 2 * patroni_lib.LOOP_WAIT and time.monotonic() < deadline:
        time.sleep(0.2)
        now = _load_times(cluster)
        if now != last:
            last, steady_since = now, time.monotonic()
    return last


def test_a_round_touches_current_members_never_and_others_only_while_steady(
    ha_cluster: Cluster, wait_until: Any
) -> None:
    """The reconciler's upgrade runs every round, failovers included (a two-node failover once
    found its standby not ready after such a round). With the files current it writes, reloads
    and signals nothing. With a member's files from before and its Patroni not answering (stopped
    here with SIGSTOP, as one that is starting or busy), it leaves them alone and says so; once
    that Patroni answers again, a round rewrites them."""
    cluster = ha_cluster
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    configs = [ha_files.member_config_path(cluster, m) for m in ha_files.members_of(cluster)]
    texts, loaded = [p.read_text() for p in configs], _settled_load_times(cluster)
    assert ha_roles.upgrade(cluster) == []
    assert [p.read_text() for p in configs] == texts and _load_times(cluster) == loaded

    standby = next(m for m in ha_files.members_of(cluster) if m.name != ha.read_statuses(cluster)[0].name)
    config = ha_files.member_config_path(cluster, standby)
    earlier = json.loads(config.read_text())
    auth = {"username": settings.PANEL_SUPERUSER, "password": credentials.superuser_password(cluster)}
    earlier["postgresql"]["authentication"] = {"superuser": auth, "replication": auth, "rewind": auth}
    runas.write_private_file(config, json.dumps(earlier, indent=2) + "\n", owner=isolation.os_user(cluster))
    pid = patroni.member_pid(config)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        # Read again just before the round: what the round must not do is reload (a primary's
        # Patroni may reload its server on its own meanwhile, as it did once in a full run).
        loaded = _load_times(cluster)
        notes = ha_roles.upgrade(cluster)
        # (What is out of date, then why not now: the certificate settings went with the logins.)
        assert len(notes) == 1 and notes[0].startswith(
            f"{cluster.name}: Patroni's files hold the superuser's password"
        ), notes
        assert notes[0].endswith(f": brought up to date later (Patroni of {standby.name} does not answer)")
        assert (
            credentials.superuser_password(cluster) in config.read_text() and _load_times(cluster) == loaded
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    note = (
        f"{cluster.name}: Patroni logs in by peer authentication and streams as {settings.PANEL_MEMBER_ROLE}"
    )
    wait_until(lambda: note in ha_roles.upgrade(cluster), timeout=TIMEOUT, message="a round rewrites it")
    assert credentials.superuser_password(cluster) not in config.read_text()
    assert ha.wait_healthy(cluster, TIMEOUT), ha.read_statuses(cluster)
    assert ha_roles.upgrade(cluster) == []
