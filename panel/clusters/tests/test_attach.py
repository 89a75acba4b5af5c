"""Integration: attaching an existing server, using a cluster provisioned here as that server."""

from __future__ import annotations

import socket

import pytest

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus
from panel.clusters.services import roles
from panel.clusters.services.attach import ExternalServer, attach_cluster
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _owner_is_staff(owner):
    """Staff attach any server they can reach and see PostgreSQL's own words; the rules for other
    accounts are replayed in tests/security/test_web_attach.py."""
    owner.is_staff = True
    owner.save()


def _server(cluster: Cluster, **kwargs: object) -> ExternalServer:
    values: dict[str, object] = {
        "host": "127.0.0.1",
        "port": cluster.port,
        "user": "doadmin",
        "password": cluster.users.get(name="doadmin").password,
        "database": "defaultdb",
        "sslmode": "require",
    }
    values.update(kwargs)
    return ExternalServer(**values)  # type: ignore[arg-type]


@pytest.fixture
def local_cluster(shared_local_cluster: Cluster) -> Cluster:
    """One real cluster for the module's tests (none of them changes what the next one needs)."""
    return shared_local_cluster


def test_it_attaches_a_running_server(local_cluster, owner):
    roles.add_database(local_cluster, "benchmark")

    attached = attach_cluster(owner, name="db-attached", server=_server(local_cluster))

    assert attached.kind == ClusterKind.EXTERNAL
    assert attached.status == ClusterStatus.ONLINE
    assert attached.version == "15"
    assert (attached.host, attached.port, attached.sslmode) == ("127.0.0.1", local_cluster.port, "require")
    # The system database is closed to doadmin, so it is not listed.
    assert set(attached.databases.values_list("name", flat=True)) == {"benchmark", "defaultdb"}
    assert attached.databases.get(name="defaultdb").is_protected
    admin = attached.users.get()
    assert (admin.name, admin.is_protected) == ("doadmin", True)
    assert admin.password == local_cluster.users.get(name="doadmin").password
    details = services.connection_details(attached, database="benchmark")
    assert details.uri().startswith(f"postgresql://doadmin:{admin.password}@127.0.0.1:{local_cluster.port}/")
    assert services.overview(attached).data_size_bytes

    # The panel manages users on an attached server through its admin credentials.
    user = roles.add_user(attached, "app")
    assert user.password
    with pytest.raises(ServiceError, match="does not run this attached server"):
        services.perform_action(attached, "stop")
    with pytest.raises(ServiceError, match="changed where the server runs"):
        roles.reset_password(attached, "doadmin")

    # Deleting the attachment forgets it and leaves the server running.
    services.delete_cluster(attached, confirm_name="db-attached")
    assert local_cluster.pgdata.exists()
    assert services.overview(local_cluster).started_at is not None


def test_a_port_nobody_listens_on_is_refused_clearly(owner, transactional_db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    server = ExternalServer("127.0.0.1", port, "doadmin", "secret", "defaultdb", "require")
    with pytest.raises(ServiceError, match="Could not connect") as refused:
        attach_cluster(owner, name="db-nowhere", server=server)
    assert "Connection refused" in refused.value.message
    assert str(port) in refused.value.message
    assert not Cluster.objects.exists()


def test_attach_refusals_save_nothing(local_cluster, owner):
    with pytest.raises(ServiceError, match='password authentication failed for user "doadmin"'):
        attach_cluster(owner, name="db-attached", server=_server(local_cluster, password="wrong"))
    with pytest.raises(ServiceError, match='database "nosuchdb" does not exist'):
        attach_cluster(owner, name="db-attached", server=_server(local_cluster, database="nosuchdb"))
    with pytest.raises(ServiceError, match="no encryption"):
        attach_cluster(owner, name="db-attached", server=_server(local_cluster, sslmode="disable"))
    with pytest.raises(ServiceError) as bad:
        attach_cluster(owner, name="Bad Name", server=_server(local_cluster))
    assert bad.value.field == "name"
    with pytest.raises(ServiceError, match="already have a cluster") as duplicate:
        attach_cluster(owner, name=local_cluster.name, server=_server(local_cluster))
    assert duplicate.value.field == "name"
    assert list(Cluster.objects.values_list("name", flat=True)) == [local_cluster.name]
