"""Row 7: the attach form made the panel connect anywhere it could reach and answered differently
for open and closed ports (a network probe for every account), and host ``.`` or ``a..b`` gave a
500. Replayed against a real PostgreSQL started here for the module: it listens on an address of
this machine that is not loopback (one made on an interface of the test's own, in 198.18.0.0/24,
when the machine has none), on a port outside PANEL_PORT_RANGE, and on 127.0.0.1; ``app`` logs
in with a password (SCRAM), ``trusted`` without one (``trust`` in pg_hba.conf).

Issue 37, item 5, for attach: accounts that are not staff were refused this machine's own
addresses only on the panel's ports, and registered nodes' addresses not at all. Now attach
follows the rule of log sinks and migration sources (every address of this machine and of every
node refused on every port), unless the operator lists the network in PANEL_ATTACH_NETWORKS;
the legitimate attaches here are to the server's address, listed.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, Node
from panel.clusters.services import destinations
from panel.clusters.services.attach import ExternalServer, attach_cluster, password_was_used, uniform_failure
from panel.core.errors import ServiceError
from tests import pgserver
from tests.security import ownaddress
from tests.security.ownaddress import own_address

pytestmark = pytest.mark.integration

APP_PASSWORD = "app-password-Lq8z"


@dataclass(frozen=True)
class Server:
    address: str  # an address of this machine, not loopback
    port: int
    socket_dir: str


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    with own_address() as found:
        yield found


@pytest.fixture(scope="module")
def server(address: str) -> Iterator[Server]:
    """A throwaway PostgreSQL run by PostgreSQL's unprivileged user."""
    from django.conf import settings

    pg_hba = (
        "local all all trust\n"
        f"host all trusted {address}/32 trust\nhost all trusted 127.0.0.1/32 trust\n"
        f"host all all {address}/32 scram-sha-256\nhost all all 127.0.0.1/32 scram-sha-256\n"
    )
    with pgserver.throwaway_server(
        port=pgserver.free_port_outside(*settings.PANEL_PORT_RANGE),
        listen_addresses=f"{address},127.0.0.1",
        pg_hba=pg_hba,
        superuser="owner",
        run_as=getattr(settings, "PANEL_RUN_AS_USER", "postgres"),
        prefix="pgpanel-attach-",
    ) as pg:
        with psycopg.connect(
            host=pg.socket_dir, port=pg.port, user="owner", dbname="postgres", autocommit=True
        ) as c:
            c.execute("CREATE ROLE trusted LOGIN")
            c.execute(f"CREATE ROLE app LOGIN PASSWORD '{APP_PASSWORD}'")
        yield Server(address=address, port=pg.port, socket_dir=pg.socket_dir)


def _form(server: Server, **overrides: str) -> dict[str, str]:
    data = {
        "name": "db-attached",
        "host": server.address,
        "port": str(server.port),
        "user": "app",
        "password": APP_PASSWORD,
        "database": "postgres",
        "sslmode": "disable",  # the throwaway server has no certificate
    }
    data.update(overrides)
    return data


def _external(server: Server, **overrides: object) -> ExternalServer:
    data: dict[str, object] = dict(_form(server))
    data.pop("name")
    data["port"] = server.port
    data.update(overrides)
    return ExternalServer(**data)  # type: ignore[arg-type]


@pytest.fixture
def open_to_all(server: Server, settings: object) -> None:
    """Every account may attach; the server's address, this machine's, is listed by the operator."""
    settings.PANEL_ATTACH_FOR_ALL = True  # type: ignore[attr-defined]
    settings.PANEL_ATTACH_FAILURE_SECONDS = 1  # type: ignore[attr-defined]
    settings.PANEL_ATTACH_NETWORKS = [f"{server.address}/32"]  # type: ignore[attr-defined]


@pytest.fixture
def staff_client(client: Client, staff_user: User) -> Client:
    client.force_login(staff_user)
    return client


def test_only_staff_may_attach_by_default(server: Server, owner: User, staff_user: User) -> None:
    with pytest.raises(ServiceError, match="reserved to staff"):
        attach_cluster(owner, name="db-attached", server=_external(server))
    assert not Cluster.objects.exists()
    # The legitimate attach beside it: staff, same server.
    attached = attach_cluster(staff_user, name="db-attached", server=_external(server))
    assert (attached.host, attached.port, attached.owner) == (server.address, server.port, staff_user)


def test_every_account_attaches_a_server_on_the_network_when_opened_to_all(
    server: Server, owner_client: Client, owner: User, open_to_all: None
) -> None:
    response = owner_client.post(reverse("clusters:attach"), _form(server))
    attached = Cluster.objects.get(owner=owner, name="db-attached")
    assert response.status_code == 302 and response.url == reverse("clusters:detail", args=[attached.pk])
    assert "postgres" in set(attached.databases.values_list("name", flat=True))


def _refused(client: Client, data: dict[str, str]) -> float:
    """Post the attach form; assert the one uniform refusal; return how long it took."""
    started = time.monotonic()
    response = client.post(reverse("clusters:attach"), data)
    took = time.monotonic() - started
    assert response.status_code == 200, data
    page = response.content.decode()
    assert uniform_failure().replace("“", "&ldquo;")[:60] in page or uniform_failure()[:60] in page, data
    assert "Connection refused" not in page and "password authentication" not in page, data
    assert not Cluster.objects.filter(name=data["name"]).exists()
    return took


def test_internal_addresses_and_the_panels_ports_are_refused_with_one_message(
    server: Server, owner_client: Client, staff_client: Client, open_to_all: None, settings: object
) -> None:
    settings.PANEL_ATTACH_RATE = 100  # type: ignore[attr-defined]
    # The same server, reachable and with the right password, behind names other accounts may
    # not use: loopback (in every spelling), and this machine's address on a panel port.
    for host in ("127.0.0.1", "localhost", "::ffff:127.0.0.1", "[::ffff:127.0.0.1]"):
        assert _refused(owner_client, _form(server, host=host)) >= 1
    # Nothing listens there, but neither may be asked: link-local (cloud metadata), unspecified.
    for host, port in (
        ("169.254.169.254", "80"),
        ("fe80::1", "5432"),
        ("0.0.0.0", str(server.port)),
        ("::", "5432"),
    ):
        assert _refused(owner_client, _form(server, host=host, port=port)) >= 1
    first, last = settings.PANEL_PORT_RANGE  # type: ignore[attr-defined]
    settings.PANEL_PORT_RANGE = (server.port - 1, server.port + 1)  # type: ignore[attr-defined]
    assert _refused(owner_client, _form(server)) >= 1
    settings.PANEL_PORT_RANGE = (first, last)  # type: ignore[attr-defined]

    # Staff may: the refusals above are the rule, not the server.
    response = staff_client.post(reverse("clusters:attach"), _form(server, host="127.0.0.1"))
    assert response.status_code == 302


def test_this_machines_own_address_is_refused_on_any_port_unless_its_network_is_listed(
    server: Server, owner_client: Client, owner: User, open_to_all: None, settings: object,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    """Issue 37, item 5: the server listens on this machine's own address, not loopback, on a port
    outside PANEL_PORT_RANGE, and lets ``app`` in with its password: the attach connected."""
    first, last = settings.PANEL_PORT_RANGE  # type: ignore[attr-defined]
    assert not first <= server.port <= last
    settings.PANEL_ATTACH_NETWORKS = []  # type: ignore[attr-defined]
    with caplog.at_level(logging.INFO, logger="panel.clusters.services.attach"):
        assert _refused(owner_client, _form(server)) >= 1
    assert f"{server.address}: an address of this machine" in caplog.text
    # The legitimate attach beside it: the operator lists the network, the same form attaches.
    settings.PANEL_ATTACH_NETWORKS = [f"{server.address}/32"]  # type: ignore[attr-defined]
    response = owner_client.post(reverse("clusters:attach"), _form(server))
    attached = Cluster.objects.get(owner=owner, name="db-attached")
    assert response.status_code == 302 and attached.host_address == server.address


def test_a_registered_nodes_addresses_are_refused(
    server: Server, owner_client: Client, open_to_all: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 37, item 5: nothing refused a node's public or private address, on any port."""
    Node.objects.create(
        name="far-node", address=ownaddress.FAR_NODE_ADDRESS, private_address=ownaddress.FAR_NODE_PRIVATE,
        port_first=30000, port_last=30199, data_dir="/srv/pgpanel", ram_bytes=2**30, vcpus=1,
    )  # fmt: skip
    with ownaddress.unreachable(), caplog.at_level(logging.INFO, logger="panel.clusters.services.attach"):
        for host in (ownaddress.FAR_NODE_ADDRESS, ownaddress.FAR_NODE_PRIVATE):
            _refused(owner_client, _form(server, host=host, port="5432"))
            assert f"{host}: an address of one of the panel's nodes" in caplog.text, caplog.text


def test_a_closed_port_an_open_port_a_wrong_password_and_a_bad_name_look_alike(
    server: Server, owner_client: Client, staff_client: Client, open_to_all: None, settings: object
) -> None:
    settings.PANEL_ATTACH_RATE = 100  # type: ignore[attr-defined]
    closed = pgserver.free_port_outside(*settings.PANEL_PORT_RANGE)  # type: ignore[attr-defined]
    took = [
        _refused(owner_client, _form(server, port=str(closed))),  # closed: refused at once
        _refused(owner_client, _form(server, password="wrong")),  # open, wrong password
        _refused(owner_client, _form(server, database="nosuchdb")),
        _refused(owner_client, _form(server, sslmode="require")),  # the server has no TLS
        _refused(owner_client, _form(server, host="no-such-host.invalid")),
    ]
    # Every failure takes at least PANEL_ATTACH_FAILURE_SECONDS, so timing tells nothing either.
    assert min(took) >= 1, took
    # Staff see why, each failure its own reason in the panel's words (libpq's go to the log).
    page = staff_client.post(reverse("clusters:attach"), _form(server, port=str(closed))).content.decode()
    assert "nothing accepts connections there" in page and "Connection refused" not in page
    page = staff_client.post(reverse("clusters:attach"), _form(server, password="wrong")).content.decode()
    assert "does not accept the user" in page and "password authentication failed" not in page


def test_a_server_that_lets_the_user_in_without_a_password_is_refused_unless_staff(
    server: Server, owner_client: Client, staff_client: Client, open_to_all: None
) -> None:
    passwordless = _form(server, user="trusted", password="anything")
    _refused(owner_client, passwordless)
    assert staff_client.post(reverse("clusters:attach"), passwordless).status_code == 302


def test_the_detection_reads_how_the_server_authenticated_the_connection(server: Server) -> None:
    """PQconnectionUsedPassword on real connections: ``trusted`` gets in without being asked,
    ``app`` is asked for its password. (The attach also sets require_auth, so libpq itself stops
    before a passwordless login completes; this checks the second, independent test.)"""
    common = {"host": server.address, "port": server.port, "dbname": "postgres", "sslmode": "disable"}
    with psycopg.connect(**common, user="trusted", password="anything") as conn:
        assert not password_was_used(conn)
    with psycopg.connect(**common, user="app", password=APP_PASSWORD) as conn:
        assert password_was_used(conn)
    with pytest.raises(psycopg.OperationalError, match="server did not complete authentication"):
        psycopg.connect(**common, user="trusted", password="x", require_auth="password,md5,scram-sha-256")


BAD_HOSTS = [".", "a..b", "..", ".a", "a" * 64 + ".example.com", "a b", " bad host ", "/var/run/postgresql",
             "db1,db2", "127.1", "2130706433", "0x7f.1", "-db.example.com", "x" * 254, "[::1"]  # fmt: skip


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_malformed_hosts_get_a_field_error_never_a_500(
    host: str, owner_client: Client, staff_client: Client, open_to_all: None
) -> None:
    for client in (owner_client, staff_client):
        data = {"name": "db-x", "host": host, "port": "5432", "user": "u", "password": "p", "database": "d"}
        response = client.post(reverse("clusters:attach"), {**data, "sslmode": "require"})
        assert response.status_code == 200
        form = response.context["form"]
        assert form.errors.get("host"), (host, form.errors)


def test_the_command_line_refuses_a_malformed_host_with_a_message(owner: User) -> None:
    with pytest.raises(CommandError, match="empty part"):
        call_command("cluster", "attach", "--name", "db-x", "--host", "a..b", "--port", "5432",
                     "--user", "u", "--database", "d", "--owner", "alice")  # fmt: skip


def test_attempts_are_limited_per_account(
    server: Server, owner_client: Client, other_client: Client, open_to_all: None, settings: object
) -> None:
    settings.PANEL_ATTACH_FAILURE_SECONDS = 0  # type: ignore[attr-defined]
    for _attempt in range(settings.PANEL_ATTACH_RATE):  # type: ignore[attr-defined]
        _refused(owner_client, _form(server, password="wrong"))
    # The next attempt is refused before any connection, even with the right password.
    response = owner_client.post(reverse("clusters:attach"), _form(server))
    assert "Too many attach attempts from this account. Try again in 10 minutes." in response.content.decode()
    assert not Cluster.objects.exists()
    # Another account is not limited by this one.
    assert other_client.post(reverse("clusters:attach"), _form(server)).status_code == 302


def _server_address(cluster: Cluster) -> str:
    """The address of the server the panel's next connection to ``cluster`` reaches."""
    with dbconn.monitor_connection(cluster, dbname="postgres") as conn:
        return str(conn.execute("SELECT inet_server_addr()").fetchone()[0])


def test_later_connections_go_to_the_checked_address_not_where_the_name_points_now(
    server: Server, owner: User, open_to_all: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29, item 6 (DNS rebinding): the name's first answer is an address the check allows;
    by the next connection the same name answers 127.0.0.1. Here ``localhost`` is that name: the
    check is given the first answer, libpq resolves it itself later (127.0.0.1, where the same
    server listens too)."""
    monkeypatch.setattr(destinations, "resolve", lambda host, port: [ipaddress.ip_address(server.address)])
    attached = attach_cluster(owner, name="db-rebound", server=_external(server, host="localhost"))
    # Every later connection (collection, users and databases) goes to the address checked.
    assert _server_address(attached) == server.address  # "127.0.0.1" before
    assert (attached.host, attached.host_address) == ("localhost", server.address)


def test_later_connections_never_read_the_panels_own_password_file(
    server: Server, staff_user: User, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29, item 6: libpq falls back on the panel user's ~/.pgpass (here PGPASSFILE, which
    libpq reads the same way) when the stored password is empty. The legitimate connection with
    the stored password still works."""
    attached = attach_cluster(staff_user, name="db-passfile", server=_external(server))
    assert _server_address(attached) == server.address
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:app:{APP_PASSWORD}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    admin = attached.users.get(name="app")
    admin.password = ""
    admin.save()
    with pytest.raises(dbconn.DatabaseError):
        _server_address(attached)  # logged in with the file's password before
