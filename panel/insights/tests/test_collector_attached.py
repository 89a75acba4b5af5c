"""Collected figures others read: an attached server collected with the admin credentials it was
given, which may not open every database (a cluster provisioned here, attached as if it were
elsewhere); and the cluster overview, which reads the last collection instead of measuring again."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from panel.clusters.services import roles
from panel.clusters.services.attach import ExternalServer, attach_cluster
from panel.insights import services
from panel.insights.tests.conftest import snapshot

pytestmark = pytest.mark.integration


def test_a_database_the_admin_may_not_open_costs_its_size_only(local_cluster: Cluster, owner: User) -> None:
    roles.add_database(local_cluster, "benchmark")
    server = ExternalServer(
        host="127.0.0.1",
        port=int(local_cluster.port or 0),
        user="doadmin",
        password=local_cluster.users.get(name="doadmin").password,
        database="defaultdb",
        sslmode="require",
    )
    attached = attach_cluster(owner, name="db-attached", server=server, operator=True)

    # doadmin may not CONNECT to the system database "postgres": pg_database_size() of it would
    # fail the whole statement and leave the server looking down.
    snap = services.collect_cluster(attached)
    assert snap.up == {"postgres": True}, snap.errors
    sizes = {labels: value for metric, labels, value in snap.gauges if metric == "db_size_bytes"}
    assert set(sizes) == {"db=benchmark", "db=defaultdb"} and all(v > 0 for v in sizes.values())

    # The overview reads the collection instead of connecting again.
    overview = cluster_services.overview(attached)
    assert overview.data_size_bytes == int(sum(sizes.values()))
    assert overview.started_at is not None


@pytest.mark.django_db
def test_a_local_clusters_overview_reads_the_last_collection_while_it_is_recent(cluster_row: Cluster) -> None:
    """No walk over PGDATA on each page load: the collector measured it a moment ago."""
    now = timezone.now()
    # Older than three collections: measured here instead (this row has no data directory).
    services.store(
        cluster_row, snapshot(now - dt.timedelta(seconds=4 * services.interval()), disk_used_bytes=1)
    )
    assert cluster_services.overview(cluster_row).data_size_bytes is None
    services.store(cluster_row, snapshot(now, disk_used_bytes=12_345_678))
    assert cluster_services.overview(cluster_row).data_size_bytes == 12_345_678
