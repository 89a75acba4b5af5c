"""Integration: attaching an existing server, using a cluster provisioned here as that server."""

from __future__ import annotations

import socket

import pytest
from django.utils import translation

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterKind, ClusterStatus
from panel.clusters.services import roles
from panel.clusters.services.attach import ExternalServer, attach_cluster
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _owner_is_staff(owner):
    """Staff attach any server they can reach and see why an attempt failed (in the panel's words:
    PostgreSQL's are the log's); the rules for other accounts are replayed in
    tests/security/test_web_attach.py."""
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
    assert refused.value.message == (
        f"Could not connect to 127.0.0.1:{port}: nothing accepts connections there; check the host, "
        "the port and that the server listens on TCP."
    )
    assert "Connection refused" not in refused.value.message  # libpq's words: the log's
    assert not Cluster.objects.exists()


def test_attach_refusals_save_nothing(local_cluster, owner, caplog):
    for server, sentence, server_words in [
        (
            _server(local_cluster, password="wrong"),
            "the server does not accept the user “doadmin” with this password from the panel's address",
            'password authentication failed for user "doadmin"',
        ),
        (
            _server(local_cluster, database="nosuchdb"),
            "the server has no database named “nosuchdb”",
            'database "nosuchdb" does not exist',
        ),
        (
            _server(local_cluster, sslmode="disable"),
            "the server accepts no login of “doadmin” to “defaultdb” from the panel's address with SSL "
            "mode “disable”",
            "no encryption",
        ),
    ]:
        with pytest.raises(ServiceError, match="Could not connect") as refused:
            attach_cluster(owner, name="db-attached", server=server)
        assert sentence in refused.value.message
        assert server_words not in refused.value.message and server_words in caplog.text
        with translation.override("de"):
            assert "Verbindung" in refused.value.message, refused.value.message
    with pytest.raises(ServiceError) as bad:
        attach_cluster(owner, name="Bad Name", server=_server(local_cluster))
    assert bad.value.field == "name"
    with pytest.raises(ServiceError, match="already have a cluster") as duplicate:
        attach_cluster(owner, name=local_cluster.name, server=_server(local_cluster))
    assert duplicate.value.field == "name"
    assert list(Cluster.objects.values_list("name", flat=True)) == [local_cluster.name]
