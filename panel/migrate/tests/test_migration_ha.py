"""Online migration into a cluster with standbys: the cluster's port is HAProxy's and the members
listen on ports of their own, so the panel's superuser makes the subscriptions on the primary
member (over its socket), not on the cluster's port, the one Patroni has now, not the one last
recorded. The session's two-member cluster is
migrated into while the source is written, cut over, and holds the same rows afterwards, on the
standby too. A primary on another node than the cluster's is refused before anything is made."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User

from panel.clusters.models import Cluster, ClusterMember, MemberRole, Node
from panel.clusters.services import roles
from panel.clusters.tests.conftest import connect_as_client, make_cluster_row
from panel.core.errors import ServiceError
from panel.migrate.models import MigrationStatus, OnlineMigration
from panel.migrate.services import actions, cutover
from panel.migrate.tests.conftest import Source, run_until_syncing
from tests.fixtures.ha_pair import HaPair, lend_to_new_owner

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OWNER = "mig-ha-owner"
DATABASE = "haorders"


@pytest.fixture(scope="module")
def ha_cluster(ha_pair: HaPair, django_db_blocker: Any) -> Iterator[Cluster]:
    """The pair, lent for the module; the database the migration made goes again afterwards
    (the loan wants the pair back as it was)."""
    with lend_to_new_owner(ha_pair, django_db_blocker, OWNER, "db-mig-ha") as cluster:
        try:
            yield cluster
        finally:
            with django_db_blocker.unblock():
                if cluster.databases.filter(name=DATABASE).exists():
                    roles.delete_database(cluster, DATABASE)


def _rows(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT id, note FROM public.orders ORDER BY id").fetchall()


def test_a_migration_into_a_cluster_with_standbys_syncs_and_cuts_over(
    ha_cluster: Cluster,
    logical_source: Source,
    settings: Any,
    wait_until: Callable[..., object],
) -> None:
    settings.PANEL_MIGRATION_SOURCE_NETWORKS = ["127.0.0.0/8"]
    cluster = ha_cluster
    primary = cluster.members.get(role=MemberRole.PRIMARY)
    assert primary.port != cluster.port  # the cluster's port is HAProxy's
    # A switch the panel has not recorded yet: the rows name the standby as the primary. The
    # migration asks Patroni, not the rows.
    cluster.members.update(role=MemberRole.STANDBY)
    cluster.members.exclude(pk=primary.pk).update(role=MemberRole.PRIMARY)
    with logical_source.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DATABASE}")
        others = [
            name
            for (name,) in conn.execute(
                "SELECT datname FROM pg_database WHERE datname NOT IN ('template0', 'template1', 'postgres', %s)",
                (DATABASE,),
            ).fetchall()
        ]
    with logical_source.connect(DATABASE) as conn:
        conn.execute("CREATE TABLE public.orders (id bigserial PRIMARY KEY, note text NOT NULL)")
        conn.execute("INSERT INTO public.orders (note) SELECT 'before ' || g FROM generate_series(1, 300) g")

    migration = logical_source.migrate_into(cluster, others)
    run_until_syncing(cluster, migration, wait_until)
    with logical_source.connect(DATABASE) as conn:
        conn.execute("INSERT INTO public.orders (note) SELECT 'during ' || g FROM generate_series(1, 100) g")
        conn.execute("UPDATE public.orders SET note = note || ' (changed)' WHERE id % 5 = 0")
        conn.execute("DELETE FROM public.orders WHERE id % 11 = 0")

    cutover.stop_migration(cluster, str(migration.pk))
    migration.refresh_from_db()
    assert migration.status == MigrationStatus.DONE, migration.error_message

    with logical_source.connect(DATABASE) as src, connect_as_client(cluster, dbname=DATABASE) as dst:
        expected = _rows(src)
        assert len(expected) == 400 - 400 // 11
        assert _rows(dst) == expected
        assert src.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
    # The standby streamed the applied rows too.
    standby = cluster.members.get(role=MemberRole.STANDBY)

    def standby_has_them() -> bool:
        with connect_as_client(cluster, dbname=DATABASE, port=standby.port) as conn:
            return _rows(conn) == expected

    wait_until(standby_has_them, timeout=60, message="the standby has the migrated rows")


def _node(name: str, address: str, first: int) -> Node:
    return Node.objects.create(
        name=name, address=address, port_first=first, port_last=first + 100, data_dir="/x",
        ram_bytes=16 * 2**30, vcpus=8,
    )  # fmt: skip


@pytest.mark.parametrize("primary_on", ["here", "there"])
def test_a_primary_on_another_node_is_refused_before_anything_is_made(owner: User, primary_on: str) -> None:
    """The subscriptions would run on the primary and read the source's password from a file on
    the cluster's node: with the primary elsewhere the migration is refused at once."""
    here, there = _node("n-here", "127.0.0.1", 40000), _node("n-there", "192.0.2.10", 41000)
    cluster = make_cluster_row(owner, node=here, num_nodes=2)
    for name, node, port in (("member-1", here, 40001), ("member-2", there, 41001)):
        ClusterMember.objects.create(
            cluster=cluster, name=name, node=node, port=port, rest_port=port + 50, data_dir=f"/x/{name}",
            role=MemberRole.PRIMARY if (node == here) == (primary_on == "here") else MemberRole.STANDBY,
        )  # fmt: skip
    with pytest.raises(ServiceError) as refused:
        actions.start_migration(
            cluster, host="127.0.0.1", port=1, dbname="postgres", username="srcadmin", password="",
            enqueue=False,
        )  # fmt: skip
    # With the primary here the next check speaks (no password given).
    expected = "migration.password_required" if primary_on == "here" else "migration.primary_elsewhere"
    assert refused.value.code == expected, refused.value.message
    assert not OnlineMigration.objects.exists()
