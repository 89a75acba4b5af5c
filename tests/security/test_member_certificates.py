"""The panel's roles are refused through HAProxy on another node before any password is asked,
replayed for real (issue 37, item 2: members on different machines).

The attack (before the fix): HAProxy reaches a member on another node from its own node's
address, the address the members' replication and rewind (``pgpanel_member``) and the panel's
own TCP logins (``pgpanel``) come from. The member lines of pg_hba.conf let those roles in from
every member node's address with a password alone, so a client of the cluster's public port on
node A, relayed to node B's member from A's address, was asked ``pgpanel``'s password: a wrong
one answered ``password authentication failed for user "pgpanel"``.

Now those lines ask for a client certificate of the cluster's member CA issued to the role as
well (``clientcert=verify-full``): without it the server refuses at the certificate check, no
password asked; a certificate of another role (Patroni's, for the superuser) is refused even with
the right password (PostgreSQL compares the certificate's name after the password).
Beside it: with the role's certificate and password the login works, for a replication
connection and into the maintenance database alike.

The server is a real PostgreSQL with the pg_hba.conf the panel renders for a cluster whose
members are on 127.0.0.1 and 127.0.0.9, its TLS files as the panel writes them (the cluster's CA
and the member CA in ``ssl_ca_file``); the client reaches it through a relay that connects from
127.0.0.9, as HAProxy on that node would (the test nodes of the other tests share 127.0.0.1, for
which the members' loopback lines apply).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings

from panel.clusters.lib import firewall, pgconf, tls
from panel.clusters.lib.libpq import outside_client_params
from panel.clusters.models import Cluster
from panel.clusters.standbys.engine import member_tls
from panel.core import runas
from tests.pgserver import free_port_outside, throwaway_server

pytestmark = pytest.mark.integration

OTHER_NODE = "127.0.0.9"  # the address HAProxy of "node B" comes from
PASSWORD = "the-right-password-0"
WRONG = "not-the-password-0"
ROLES = (settings.PANEL_SUPERUSER, settings.PANEL_MEMBER_ROLE)


class Relay:
    """A TCP relay on 127.0.0.1 to ``target`` that connects from ``source``: HAProxy on another
    node than the member's, seen from the member."""

    def __init__(self, target: tuple[str, int], source: str) -> None:
        self.target, self.source = target, source
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target, timeout=30, source_address=(self.source, 0))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for end in (a, b):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


def _server_user() -> pwd.struct_passwd:
    return pwd.getpwnam("postgres") if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())


@pytest.fixture(scope="module")
def member() -> Iterator[tuple[Cluster, int, Relay]]:
    """A member's server with the panel's pg_hba.conf for members on 127.0.0.1 and OTHER_NODE,
    and a relay to it from OTHER_NODE."""
    cluster = Cluster(name="db-members-tls")  # its id and name are all the certificates need
    runner = _server_user()
    owner = runas.OsUser(runner.pw_name, runner.pw_uid, runner.pw_gid, runner.pw_dir)
    files = Path(tempfile.mkdtemp(prefix="pgpanel-member-tls-"))
    os.chmod(files, 0o755)
    certs = tls.generate(cluster.name, ["127.0.0.1"])
    runas.write_private_file(files / "server.crt", certs.server_cert_pem, owner=owner)
    runas.write_private_file(files / "server.key", certs.server_key_pem, owner=owner)
    cluster.ca_certificate = certs.ca_cert_pem
    assert member_tls.write_ssl_ca(cluster, files / "ca.crt", owner)  # as each node writes it
    hba = pgconf.render_hba(
        settings.PANEL_SUPERUSER,
        settings.PANEL_MONITOR_ROLE,
        [],
        settings.PANEL_REPLICATION_ROLE,
        members_from=["127.0.0.1", OTHER_NODE],
        clients_from=firewall.proxy_networks(["127.0.0.1"]),
        member_role=settings.PANEL_MEMBER_ROLE,
    )
    ssl = (
        f"ssl = on\nssl_cert_file = '{files / 'server.crt'}'\nssl_key_file = '{files / 'server.key'}'\n"
        f"ssl_ca_file = '{files / 'ca.crt'}'\n"
    )
    port = free_port_outside(*settings.PANEL_PORT_RANGE)
    try:
        with throwaway_server(
            port=port,
            listen_addresses="127.0.0.1",
            pg_hba="local all all trust\n" + hba,  # the first line: this fixture's own set-up
            superuser="postgres",
            settings=ssl,
            run_as=runner.pw_name,
        ) as server:
            with psycopg.connect(
                host=server.socket_dir, port=port, user="postgres", dbname="postgres"
            ) as conn:
                conn.autocommit = True
                for role in ROLES:
                    conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION PASSWORD '{PASSWORD}'")
            relay = Relay(("127.0.0.1", port), OTHER_NODE)
            try:
                yield cluster, port, relay
            finally:
                relay.close()
    finally:
        for path in files.iterdir():
            path.unlink()
        files.rmdir()


def _logins(role: str) -> list[dict[str, str]]:
    return [
        {"user": role, "dbname": "postgres"},
        {"user": role, "dbname": "replication", "replication": "true"},
    ]


def _through_relay(relay: Relay, login: dict[str, str], password: str, **extra: Any) -> str:
    """The server's answer to a login through the relay ("" when it is let in)."""
    try:
        psycopg.connect(
            host="127.0.0.1",
            port=relay.port,
            password=password,
            sslmode="require",
            connect_timeout=10,
            **{**outside_client_params("require"), **extra},  # no ~/.postgresql certificate
            **login,
        ).close()
    except psycopg.OperationalError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("role", ROLES)
def test_a_panel_role_from_another_nodes_address_is_refused_before_any_password(
    member: tuple[Cluster, int, Relay], role: str
) -> None:
    _, _, relay = member
    for login in _logins(role):
        answer = _through_relay(relay, login, WRONG)
        assert "password authentication failed" not in answer, (login, answer)
        assert "certificate" in answer, (login, answer)


def test_another_roles_certificate_does_not_open_the_superuser(
    member: tuple[Cluster, int, Relay], tmp_path: Path
) -> None:
    """Patroni's certificate (the members' role's, in the cluster's OS user's files) with the
    superuser's right password: refused, the certificate's name is not the role's."""
    cluster, _, relay = member
    member_tls.write_client_files(cluster, tmp_path, settings.PANEL_MEMBER_ROLE, runas.current_user())
    cert, key = member_tls.client_paths(tmp_path)
    for login in _logins(settings.PANEL_SUPERUSER):
        answer = _through_relay(relay, login, PASSWORD, sslcert=str(cert), sslkey=str(key))
        # PostgreSQL compares the certificate's name after the password and then answers as for
        # a wrong password (the mismatch is in its log); the same password with the superuser's
        # own certificate is let in (below).
        assert "FATAL" in answer, (login, answer)


def test_with_the_roles_certificate_and_password_the_member_logins_work(
    member: tuple[Cluster, int, Relay], tmp_path: Path
) -> None:
    cluster, _, relay = member
    member_tls.write_client_files(cluster, tmp_path, settings.PANEL_MEMBER_ROLE, runas.current_user())
    cert, key = member_tls.client_paths(tmp_path)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    for login in _logins(settings.PANEL_MEMBER_ROLE):
        assert _through_relay(relay, login, PASSWORD, sslcert=str(cert), sslkey=str(key)) == "", login
    # The panel's own login to a member on another node: its superuser's certificate.
    params = member_tls.panel_client_params(cluster)
    assert stat.S_IMODE(os.stat(params["sslkey"]).st_mode) == 0o600
    for login in _logins(settings.PANEL_SUPERUSER):
        assert _through_relay(relay, login, PASSWORD, **params) == "", login
    # And from loopback (members sharing a node) the password alone, as before.
    _, port, _ = member
    with psycopg.connect(
        host="127.0.0.1", port=port, user=settings.PANEL_MEMBER_ROLE, password=PASSWORD, dbname="postgres"
    ):
        pass
