"""Creating, changing and deleting pools: every refusal comes before anything is written."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from panel.clusters.models import Cluster, ClusterKind
from panel.clusters.services import transitions
from panel.clusters.tests.conftest import make_cluster_row
from panel.core.errors import ServiceError
from panel.pools import services
from panel.pools.models import ConnectionPool
from panel.pools.tests.test_lib_pgbouncer_ini import NAME_VERDICTS

INVALID_NAMES = sorted(name for name, verdict in NAME_VERDICTS.items() if verdict is not None) + [
    "",
    "ab",
    "x" * 61,
    "pgbouncer",
    "PgBouncer",
    "new\nline",
    "tab\tbed",
    "star*",
    "nul\x00x",
]


@pytest.fixture
def row(owner: User) -> Cluster:
    """A 4 GB-plan cluster row (97 for pools) with no server behind it: refusals never reach one."""
    return make_cluster_row(owner)


def refusal(cluster: Cluster, **changes: object) -> ServiceError:
    values: dict[str, object] = {
        "name": "test-pool",
        "database": "appdb",
        "user": "",
        "mode": "transaction",
        "size": 10,
    }
    values.update(changes)
    before = list(ConnectionPool.objects.values_list("pk", flat=True))
    with pytest.raises(ServiceError) as exc_info:
        services.create_pool(cluster, **values)  # type: ignore[arg-type]
    assert list(ConnectionPool.objects.values_list("pk", flat=True)) == before
    return exc_info.value


@pytest.mark.parametrize("name", INVALID_NAMES, ids=lambda n: repr(n[:16]))
def test_it_refuses_invalid_names(row: Cluster, name: str) -> None:
    error = refusal(row, name=name)
    assert error.field == "name"
    assert error.message


def test_it_refuses_a_pool_over_budget(row: Cluster) -> None:
    error = refusal(row, size=98)
    assert error.field == "size"
    assert "Only 97 of the cluster's 97 connections are left" in error.message


def test_it_counts_existing_pools_in_the_budget(row: Cluster) -> None:
    ConnectionPool.objects.create(cluster=row, name="big", database="appdb", size=90)
    assert services.pool_budget(row) == (90, 97)
    error = refusal(row, size=8, name="other")
    assert error.field == "size"
    assert "Only 7 of" in error.message


@pytest.mark.parametrize(
    ("changes", "field", "fragment"),
    [
        ({"database": "nope"}, "database", "No database named “nope”"),
        ({"database": ""}, "database", "No database named"),
        ({"user": "ghost"}, "user", "No user named “ghost”"),
        ({"mode": "party"}, "mode", "transaction, session, statement"),
        ({"size": 0}, "size", "at least 1"),
        ({"size": -3}, "size", "at least 1"),
        ({"size": "5"}, "size", "whole number"),
        ({"size": True}, "size", "whole number"),
    ],
)
def test_it_refuses_bad_fields(row: Cluster, changes: dict[str, object], field: str, fragment: str) -> None:
    error = refusal(row, **changes)
    assert error.field == field
    assert fragment in error.message


def test_it_refuses_a_duplicate_name(row: Cluster) -> None:
    ConnectionPool.objects.create(cluster=row, name="test-pool", database="appdb", size=1)
    with pytest.raises(ServiceError) as exc_info:
        services.create_pool(row, "test-pool", "appdb", "", "transaction", 1)
    error = exc_info.value
    assert error.field == "name"
    assert "already exists" in error.message
    assert ConnectionPool.objects.count() == 1


def test_it_refuses_pools_on_an_attached_server(row: Cluster) -> None:
    Cluster.objects.filter(pk=row.pk).update(kind=ClusterKind.EXTERNAL, pooler_port=None)
    row.refresh_from_db()
    error = refusal(row)
    assert "provisioned by this panel" in error.message


def test_it_refuses_pools_on_a_stopped_cluster(row: Cluster) -> None:
    transitions.mark(row, "stopped")
    error = refusal(row)
    assert "start it first" in error.message


def test_an_update_is_refused_over_budget_but_may_use_its_own_size(row: Cluster) -> None:
    pool = ConnectionPool.objects.create(cluster=row, name="test-pool", database="appdb", size=50)
    ConnectionPool.objects.create(cluster=row, name="other", database="appdb", size=40)
    with pytest.raises(ServiceError) as exc_info:
        services.update_pool(pool, "appdb", "", "transaction", 58)
    assert exc_info.value.field == "size"
    assert "Only 57 of" in exc_info.value.message
    pool.refresh_from_db()
    assert pool.size == 50


def test_it_refuses_to_delete_what_a_pool_uses_naming_the_pool(row: Cluster) -> None:
    ConnectionPool.objects.create(cluster=row, name="reports", database="appdb", user="app", size=2)
    ConnectionPool.objects.create(cluster=row, name="batch.jobs", database="appdb", size=2)
    with pytest.raises(ServiceError, match="“appdb” is used by the pool\\(s\\) “batch.jobs”, “reports”"):
        services.ensure_not_used(row, database="appdb")
    with pytest.raises(ServiceError, match="“app” is used by the pool\\(s\\) “reports”"):
        services.ensure_not_used(row, user="app")
    services.ensure_not_used(row, database="defaultdb")
    services.ensure_not_used(row, user="doadmin")


def test_connection_details_point_at_the_pooler(row: Cluster, settings: object) -> None:
    inbound = ConnectionPool.objects.create(cluster=row, name="test-pool", database="appdb", size=2)
    fixed = ConnectionPool.objects.create(cluster=row, name="app.pool", database="appdb", user="app", size=2)
    details = services.pool_connection_details(inbound)
    assert (details.user, details.port, details.database, details.sslmode) == (
        "doadmin",
        26901,
        "test-pool",
        "require",
    )
    assert services.pool_connection_details(inbound, "app").user == "app"
    assert services.pool_connection_details(fixed).user == "app"
    with pytest.raises(ServiceError) as exc_info:
        services.pool_connection_details(fixed, "doadmin")
    assert exc_info.value.field == "user"
    with pytest.raises(ServiceError) as exc_info:
        services.pool_connection_details(inbound, "ghost")
    assert exc_info.value.field == "user"
