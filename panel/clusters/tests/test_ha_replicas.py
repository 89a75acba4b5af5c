"""A read-only replica of a cluster with standbys (Patroni, etcd, HAProxy): it streams through the
cluster's port with a Patroni permanent slot, keeps streaming from the new primary after a
switchover without being rebuilt, and deleting it removes the slot from Patroni's configuration
and from every member. Bad input is refused as for a one-member source."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from panel.clusters.engine import dbconn, postgres
from panel.clusters.models import Cluster, MemberRole, credentials
from panel.clusters.replicas.services import replica_heal, replica_slots, replicas, streaming
from panel.clusters.services import reconciler
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.services import ha, switchover
from panel.clusters.tests.conftest import connect_as_client
from panel.core.errors import ServiceError
from panel.core.polling import wait_for
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

OWNER = "ha-replica-owner"
RECOVERY_TIMEOUT = 90


def test_permanent_slots_declare_and_remove_by_name() -> None:
    body = patroni_lib.permanent_slots(declare=["pgpanel_replica_ab12"], remove=["pgpanel_replica_cd34"])
    assert body == {"slots": {"pgpanel_replica_ab12": {"type": "physical"}, "pgpanel_replica_cd34": None}}
    for bad in ("Upper", "with-dash", "", "x" * 64, "a;b"):
        with pytest.raises(ValueError):
            patroni_lib.permanent_slots(declare=[bad])


@pytest.fixture(scope="module")
def source(ha_pair: HaPair, django_db_blocker: object) -> Iterator[Cluster]:
    """The session's two-member db-s-1vcpu-2gb cluster, named db-ha-source for the module (its
    replicas are deleted after it)."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-ha-source") as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def _rows(db: None) -> None:
    """Each test's rows are rolled back; the module's source row was made outside them."""


def fresh(cluster: Cluster) -> Cluster:
    return Cluster.objects.select_related("node", "replica_of").get(pk=cluster.pk)


def _has_row(cluster: Cluster, item: int) -> bool:
    try:
        with connect_as_client(cluster) as conn:
            return conn.execute("SELECT count(*) FROM items WHERE id = %s", [item]).fetchone() == (1,)
    except psycopg.Error:
        return False


def _write(cluster: Cluster, item: int) -> bool:
    """One row through the cluster's port (HAProxy: whichever member is primary)."""
    try:
        with connect_as_client(cluster, autocommit=True) as conn:
            conn.execute("INSERT INTO items VALUES (%s)", [item])
    except psycopg.Error:
        return False
    return True


def _declared_soon(cluster: Cluster, condition: Callable[[dict[str, object]], bool]) -> bool:
    """Whether Patroni's permanent slots meet ``condition`` within a few seconds: a member's
    ``GET /config`` reads its cached view of etcd, a moment behind a ``PATCH``."""
    return wait_for(lambda: condition(replica_slots.declared_slots(cluster)), 10, interval=0.2)


def _other_primary(cluster: Cluster, than: str) -> str | None:
    return next(
        (
            s.name
            for s in ha.read_statuses(cluster)
            if s.is_primary and s.state == "running" and s.name != than
        ),
        None,
    )


def _streams_through_its_slot_on(source: Cluster, member: str, replica: Cluster, slot: str) -> None:
    """The replica streams from ``member`` (the primary now) through its slot there, on the
    primary's timeline."""
    port = source.members.get(name=member).port
    with dbconn.admin_connection(source, port=port) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        # The timeline it writes on now (pg_control's may still be the old one until a checkpoint).
        timeline = conn.execute(
            "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"
        ).fetchone()
        active = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", [slot]
        ).fetchone()
    assert active == (True,)

    def received() -> tuple[object, ...] | None:
        with dbconn.admin_connection(replica) as conn:
            return conn.execute("SELECT status, received_tli FROM pg_stat_wal_receiver").fetchone()

    assert received() == ("streaming", timeline[0] if timeline else None)


@pytest.mark.integration
def test_a_replica_keeps_streaming_from_the_new_primary_and_its_slot_goes_with_it(source: Cluster) -> None:
    source = fresh(source)
    with connect_as_client(source, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY)")
        conn.execute("INSERT INTO items VALUES (1)")
    replica = replicas.add_replica(source, name="db-ha-replica")
    slot = streaming.slot_name(replica)
    try:
        # It streams from the members' own ports, not through HAProxy (which lets no panel role
        # in), libpq picking the primary, with a permanent slot that Patroni keeps on every member.
        ports = ",".join(str(port) for port in source.members.order_by("name").values_list("port", flat=True))
        assert f"port='{ports}'" in streaming.conninfo(replica)
        assert "target_session_attrs='primary'" in streaming.conninfo(replica)
        assert f"{source.port}" not in ports.split(",")
        assert _declared_soon(source, lambda slots: slots == {slot: {"type": "physical"}})
        every_member = sorted(source.members.values_list("name", flat=True))
        assert len(every_member) == 2
        assert wait_for(
            lambda: replica_slots.members_with_slot(source, slot) == every_member, 20, interval=0.2
        )
        assert wait_for(lambda: _has_row(replica, 1), 10, interval=0.2)
        # A slot no longer declared (etcd's data lost) is declared again by the reconciler.
        status, _text = patroni.rest(
            "PATCH",
            source.members.first().rest_port,
            "/config",
            patroni_lib.permanent_slots(remove=[slot]),
            auth=credentials.rest_credentials(source),
        )
        assert status == 200 and _declared_soon(source, lambda slots: slot not in slots)
        assert replica_slots.keep_slots_declared(source) == [
            f"{source.name}: replica slots declared {[slot]}, removed []"
        ]
        assert _declared_soon(source, lambda slots: slots == {slot: {"type": "physical"}})
        assert replica_slots.keep_slots_declared(source) == []
        assert wait_for(
            lambda: replica_slots.members_with_slot(source, slot) == every_member, 20, interval=0.2
        )
        with connect_as_client(replica) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO items VALUES (99)")

        # A switchover: the replica follows the new primary, the same postmaster (no rebuild).
        postmaster = postgres.postmaster_pid(replica.pgdata)
        old = source.members.get(role=MemberRole.PRIMARY)
        new_name = switchover.switchover(source)
        assert new_name != old.name
        assert wait_for(lambda: _write(fresh(source), 2), 30, interval=0.2)
        assert wait_for(lambda: _has_row(replica, 2), 60, interval=0.2)
        _streams_through_its_slot_on(source, new_name, replica, slot)
        (row,) = replicas.list_replicas(fresh(source))
        assert row.replica.pk == replica.pk and row.state == "streaming"

        # A crash: the primary's postmaster killed, Patroni fails over, the replica follows again.
        assert ha.wait_healthy(source, RECOVERY_TIMEOUT)
        crashed = source.members.get(name=new_name)
        pid = postgres.postmaster_pid(Path(crashed.data_dir))
        assert pid is not None
        patroni.kill_postmaster(pid)
        assert wait_for(lambda: _other_primary(source, new_name) is not None, RECOVERY_TIMEOUT, interval=0.2)
        took_over = _other_primary(source, new_name)
        assert took_over is not None
        ha.refresh_members(source)
        assert wait_for(lambda: _write(fresh(source), 3), 30, interval=0.2)
        assert wait_for(lambda: _has_row(replica, 3), 60, interval=0.2)
        _streams_through_its_slot_on(source, took_over, replica, slot)
        assert postgres.postmaster_pid(replica.pgdata) == postmaster

        # Deleting it removes the permanent slot from Patroni's configuration and every member.
        replicas.delete_replica(fresh(replica), foreground=True)
        assert _declared_soon(source, lambda slots: slot not in slots)
        assert ha.wait_healthy(source, RECOVERY_TIMEOUT)  # the crashed member answers again too
        assert wait_for(lambda: replica_slots.members_with_slot(source, slot) == [], 20, interval=0.2)
        every_answers = [s.name for s in ha.read_statuses(source) if s.state in ha.HEALTHY_STATES]
        assert sorted(every_answers) == every_member
    finally:
        if Cluster.objects.filter(pk=replica.pk).exists():
            replicas.delete_replica(fresh(replica), foreground=True)


@pytest.mark.integration
def test_bad_input_is_refused_with_nothing_made(source: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    source = fresh(source)
    before = Cluster.objects.count()
    declared = replica_slots.declared_slots(source)
    with pytest.raises(ServiceError) as small:
        replicas.create_replica(source, name="db-ha-small", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    assert small.value.code == "replica.plan_too_small" and small.value.field == "plan"
    with pytest.raises(ServiceError) as taken:
        replicas.create_replica(source, name="db-ha-source", enqueue=False)
    assert taken.value.code == "cluster.name_taken"
    with pytest.raises(ServiceError) as not_replica:
        replicas.promote_replica(source)
    assert not_replica.value.code == "replica.not_a_replica"
    # A replica's slot left declared (deleted while no Patroni answered) is removed by the
    # reconciler; a permanent slot that is not a replica's is left alone.
    gone, other = f"{streaming.SLOT_PREFIX}{'0' * 32}", "someone_elses_slot"
    status, _text = patroni.rest(
        "PATCH",
        source.members.first().rest_port,
        "/config",
        patroni_lib.permanent_slots(declare=[gone, other]),
        auth=credentials.rest_credentials(source),
    )
    assert status == 200
    try:
        assert _declared_soon(source, lambda slots: gone in slots and other in slots)
        assert replica_slots.keep_slots_declared(source) == [
            f"{source.name}: replica slots declared [], removed {[gone]}"
        ]
        assert _declared_soon(source, lambda slots: gone not in slots and other in slots)
    finally:
        patroni.rest(
            "PATCH",
            source.members.first().rest_port,
            "/config",
            patroni_lib.permanent_slots(remove=[other]),
            auth=credentials.rest_credentials(source),
        )
    assert _declared_soon(source, lambda slots: slots == declared)

    # Its standby takes a WAL sender and a slot too: one replica fewer than a one-member cluster.
    assert replicas.max_replicas(source) == replicas.MAX_REPLICAS - 1
    monkeypatch.setattr(replicas, "MAX_REPLICAS", 1)
    with pytest.raises(ServiceError) as too_many:
        replicas.create_replica(source, name="db-ha-one-more", enqueue=False)
    assert too_many.value.code == "replica.too_many" and too_many.value.params == {"count": 0}
    assert Cluster.objects.count() == before
    assert replica_slots.declared_slots(source) == declared


# --- a replica left on the old timeline by a crash failover, healed by the reconciler -------------


@pytest.fixture(scope="module")
def follower(source: Cluster, django_db_blocker: object) -> Iterator[Cluster]:
    """A replica of the module's source, made once the tests above have left it healthy."""
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        src = fresh(source)
        assert ha.wait_healthy(src, RECOVERY_TIMEOUT)
        ha.refresh_members(src)
        assert wait_for(lambda: _run(src, "CREATE TABLE IF NOT EXISTS healed (id int PRIMARY KEY)"), 30)
        replica = replicas.add_replica(src, name="db-ha-follower")
        try:
            yield replica
        finally:
            if Cluster.objects.filter(pk=replica.pk).exists():
                replicas.delete_replica(fresh(replica), foreground=True)


def _run(cluster: Cluster, statement: str, *, local: bool = False) -> bool:
    try:
        with connect_as_client(cluster, autocommit=True) as conn:
            if local:  # the commit waits for no standby
                conn.execute("SET synchronous_commit = local")
            conn.execute(statement)
    except psycopg.Error:
        return False
    return True


def _healed_rows(replica: Cluster, ca_file: Path) -> set[int] | None:
    """The rows of ``healed`` on the replica, over TLS verified against the CA it had before."""
    try:
        with connect_as_client(replica, sslmode="verify-full", sslrootcert=str(ca_file)) as conn:
            return {row[0] for row in conn.execute("SELECT id FROM healed").fetchall()}
    except psycopg.Error:
        return None


def _primary_and_standby(source: Cluster) -> tuple[str, str]:
    roles: dict[bool, str] = {}
    for name, port in source.members.values_list("name", "port"):
        with dbconn.admin_connection(source, port=int(port)) as conn:
            roles[bool(conn.execute("SELECT pg_is_in_recovery()").fetchone()[0])] = name
    return roles[False], roles[True]


@pytest.mark.integration
def test_the_reconciler_leaves_a_healthy_replica_alone(follower: Cluster) -> None:
    replica = fresh(follower)
    postmaster, events = postgres.postmaster_pid(replica.pgdata), replica.events.count()
    with dbconn.admin_connection(replica) as conn:
        assert conn.execute("SHOW wal_retrieve_retry_interval").fetchone() == ("500ms",)
    assert replica_heal.diverged(replica) is None
    assert not [note for note in reconciler.reconcile() if replica.name in note]
    assert postgres.postmaster_pid(replica.pgdata) == postmaster
    assert fresh(replica).status == "online" and replica.events.count() == events


@pytest.mark.integration
def test_a_replica_ahead_of_the_new_primary_is_healed_by_the_reconciler(
    source: Cluster,
    follower: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mailoutbox: list[object],
    django_capture_on_commit_callbacks: Callable[..., object],
) -> None:
    source, replica = fresh(source), fresh(follower)
    ca_file = tmp_path / "replica-ca.crt"
    ca_file.write_text(replica.ca_certificate)
    details = (replica.port, replica.ca_certificate, replica.users.get(name="doadmin").password)
    assert _run(source, "INSERT INTO healed VALUES (1)")
    assert wait_for(lambda: _healed_rows(replica, ca_file) == {1}, 20, interval=0.2)
    old, standby = _primary_and_standby(source)
    primary = source.members.get(name=old)
    # The standby gets nothing more: its walsender on the primary stopped. A commit that waits
    # for no standby reaches the replica only; then the primary crashes and the standby, which
    # never had it, is promoted: the replica is ahead of the new timeline's fork.
    with dbconn.admin_connection(source, port=int(primary.port)) as conn:
        (sender,) = conn.execute(
            "SELECT pid FROM pg_stat_replication WHERE application_name = %s", [standby]
        ).fetchone()
    os.kill(sender, signal.SIGSTOP)
    try:
        assert _run(source, "INSERT INTO healed VALUES (2)", local=True)
        assert wait_for(lambda: _healed_rows(replica, ca_file) == {1, 2}, 20, interval=0.2)
        pid = postgres.postmaster_pid(Path(primary.data_dir))
        assert pid is not None
        patroni.kill_postmaster(pid)
    finally:
        os.kill(sender, signal.SIGKILL)
    assert wait_for(lambda: _other_primary(source, old) == standby, RECOVERY_TIMEOUT, interval=0.2)
    ha.refresh_members(source)
    assert wait_for(lambda: _run(fresh(source), "INSERT INTO healed VALUES (3)"), 30, interval=0.2)
    # It cannot follow by itself (the panel's own connections say so, not only its log) …
    assert wait_for(lambda: replica_heal.diverged(fresh(replica)) is not None, 30, interval=0.2)
    # … and the reconciler heals it, with an event; its connection details are unchanged.
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[attr-defined]
        assert wait_for(
            lambda: any(f"{replica.name}: re-synchronised" in note for note in reconciler.reconcile()),
            60,
            interval=0.5,
        )
    (email,) = [m for m in mailoutbox if "re-synchronised" in m.body]  # type: ignore[attr-defined]
    assert email.to == [f"{OWNER}@example.com"] and replica.name in email.subject
    healed = fresh(replica)
    assert healed.status == "online"
    assert (healed.port, healed.ca_certificate, healed.users.get(name="doadmin").password) == details
    assert wait_for(lambda: _healed_rows(healed, ca_file) == {1, 3}, 30, interval=0.2)
    (event,) = healed.events.filter(kind="replica-resynced")
    assert event.message.startswith("Replica re-synchronised after its source's failover in ")
    assert event.message.endswith("(pg_rewind).")
    (warned,) = healed.events.filter(kind="replica-diverged")
    assert "cannot follow its source after a failover" in warned.message
    with connect_as_client(healed) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("INSERT INTO healed VALUES (4)")
    lag = streaming.replica_lag(fresh(source)).get(streaming.slot_name(healed))
    assert lag is not None and lag.state == "streaming"

    # Where pg_rewind fails, the replica is copied again in place: the same details still.
    def no_rewind(_job: object) -> None:
        raise replica_heal.EngineError("pg_rewind failed: for the test")

    monkeypatch.setattr(replica_heal, "_rewind", no_rewind)
    assert replica_heal.heal(healed, "for the test").startswith(
        f"{healed.name}: re-synchronised with pg_basebackup"
    )
    rebuilt = fresh(healed)
    assert rebuilt.status == "online" and rebuilt.events.filter(kind="replica-resynced").count() == 2
    assert (rebuilt.port, rebuilt.ca_certificate, rebuilt.users.get(name="doadmin").password) == details
    assert _run(fresh(source), "INSERT INTO healed VALUES (5)")
    assert wait_for(lambda: _healed_rows(rebuilt, ca_file) == {1, 3, 5}, 30, interval=0.2)
