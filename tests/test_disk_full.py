"""Issue 15, "the disk itself": a cluster whose data directory is a small volume (a tmpfs) is
filled by its tenant. The panel turns it read-only before the volume is full, so PostgreSQL never
PANICs on a WAL write and stays up; dropping data makes it writable again; no committed row is
lost. Needs root (mount)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import psycopg
import pytest
from django.contrib.auth.models import User
from psycopg import errors

from panel.clusters import services
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster
from panel.quotas import services as quotas
from panel.quotas.services import reserve
from tests.fixtures.clusters import make_local_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)"),
]
VOLUME_MB = 256


@pytest.fixture
def small_volume_cluster(owner: User) -> Iterator[Cluster]:
    """A real cluster whose PGDATA is moved, server stopped, onto a tmpfs of VOLUME_MB."""
    cluster = make_local_cluster(owner, name="db-small-disk")
    pgdata = cluster.pgdata
    moved = pgdata.with_name("pgdata.orig")
    mounted = False
    try:
        services.perform_action(cluster, "stop")
        os.rename(pgdata, moved)
        pgdata.mkdir(mode=0o700)
        st = moved.stat()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={VOLUME_MB}m,mode=0700,uid={st.st_uid},gid={st.st_gid}",
             "tmpfs", str(pgdata)],
            check=True,
        )  # fmt: skip
        mounted = True
        subprocess.run(["cp", "-a", f"{moved}/.", str(pgdata)], check=True)
        shutil.rmtree(moved)
        cluster = services.perform_action(Cluster.objects.get(pk=cluster.pk), "start")
        assert cluster.status == "online", cluster.error_message
        yield cluster
    finally:
        postgres.kill(pgdata)
        if mounted:
            subprocess.run(["umount", "-l", str(pgdata)], check=False)
        shutil.rmtree(moved, ignore_errors=True)
        if Cluster.objects.filter(pk=cluster.pk).exists():
            services.delete_cluster(Cluster.objects.get(pk=cluster.pk), confirm_name=cluster.name)


def test_a_filling_volume_turns_the_cluster_read_only_before_it_is_full(
    small_volume_cluster: Cluster,
) -> None:
    cluster = small_volume_cluster
    uri = services.connection_details(cluster).uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE TABLE keep (id int PRIMARY KEY)")
        conn.execute("CREATE TABLE filler (pad text)")
        committed = 0
        stopped = False
        for _step in range(200):
            try:
                with conn.transaction():
                    conn.execute("INSERT INTO keep VALUES (%s)", [committed])
                    conn.execute(
                        "INSERT INTO filler SELECT repeat(md5(g::text), 32) FROM generate_series(1, 1500) g"
                    )
                committed += 1
            except errors.DiskFull as exc:
                assert "is over its storage quota" in str(exc)
                stopped = True
                break
            quotas.run_cycle(cluster)  # the collection cycle, run after each step here
            percent = reserve.volume_percent(cluster.pgdata)
            assert percent < 100, "the volume filled up before the cluster was made read-only"
        assert stopped, "the cluster was never made read-only"
        storage = quotas.storage_of(cluster)
        assert storage.volume_full_since is not None and storage.volume_percent < 100
        assert conn.execute("SELECT 1").fetchone() == (1,)  # still up: no PANIC
        assert conn.execute("SELECT count(*) FROM keep").fetchone() == (committed,)
        assert cluster.events.filter(kind="volume-full").exists()

        # Dropping data frees the volume; the next cycle makes the cluster writable again.
        conn.execute("DROP TABLE filler")
        quotas.run_cycle(cluster)
        assert quotas.storage_of(cluster).volume_full_since is None, quotas.storage_of(cluster).volume_percent
        conn.execute("INSERT INTO keep VALUES (%s)", [committed])
        assert conn.execute("SELECT count(*) FROM keep").fetchone() == (committed + 1,)
    # And after a restart, every committed row is there.
    cluster = services.perform_action(Cluster.objects.get(pk=cluster.pk), "restart")
    with psycopg.connect(uri, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM keep").fetchone() == (committed + 1,)
