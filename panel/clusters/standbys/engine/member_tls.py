"""The files of the member CA (``lib.member_tls``): the members' role's client certificate for
Patroni and the members' ``ssl_ca_file`` (the cluster's CA and the member CA), in the cluster's
``ha`` directory, the cluster's OS user's; the superuser's certificate for the panel's own logins
to a member on another node (the panel's data directory, the panel's user). Each is 0600 and
rewritten only when it differs; every node computes the same texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from panel import crypto
from panel.clusters.models import Cluster
from panel.clusters.standbys.lib import member_tls
from panel.core import runas
from panel.core.runas import OsUser

CLIENT_CERT = "member-client.crt"
CLIENT_KEY = "member-client.key"
CA_FILE = "ca.crt"  # pgconf: ssl_ca_file, in each data directory (the cluster's CA)
SSL_CA = "members-ca.crt"  # the members' ssl_ca_file instead (lib.patroni: member_ssl_ca)


def _secret(cluster: Cluster, what: str) -> str:
    return crypto.derived_secret(f"member-tls:{cluster.pk}:{what}")


def ca_pem(cluster: Cluster) -> str:
    return member_tls.ca_pem(_secret(cluster, "ca"), cluster.pk.hex)


def client_pair(cluster: Cluster, role: str) -> member_tls.KeyPair:
    return member_tls.client(_secret(cluster, "ca"), cluster.pk.hex, _secret(cluster, f"client:{role}"), role)


def _write(path: Path, text: str, owner: OsUser) -> bool:
    try:
        if path.read_text() == text:
            return False
    except FileNotFoundError:
        pass
    runas.write_private_file(path, text, owner=owner)
    return True


def client_paths(directory: Path) -> tuple[Path, Path]:
    return directory / CLIENT_CERT, directory / CLIENT_KEY


def write_client_files(cluster: Cluster, directory: Path, role: str, owner: OsUser) -> bool:
    """``role``'s certificate and key in ``directory`` (0600, ``owner``); True if one changed."""
    pair = client_pair(cluster, role)
    cert, key = client_paths(directory)
    changed = _write(key, pair.key_pem, owner)
    return _write(cert, pair.cert_pem, owner) or changed


def ssl_ca_path(directory: Path) -> Path:
    return directory / SSL_CA


def write_ssl_ca(cluster: Cluster, path: Path, owner: OsUser) -> bool:
    """The members' ``ssl_ca_file`` at ``path``: the cluster's CA (what its server certificate
    names) and the member CA; True if it changed (read at the server's next reload)."""
    cluster_ca = cluster.ca_certificate
    if not cluster_ca and (cluster.pgdata / CA_FILE).exists():
        cluster_ca = (cluster.pgdata / CA_FILE).read_text()
    return _write(path, member_tls.trusted_cas(cluster_ca, ca_pem(cluster)), owner)


def panel_client_params(cluster: Cluster) -> dict[str, Any]:
    """libpq's ``sslcert``/``sslkey`` for the panel's superuser on a member of another node, the
    files written first (the panel's own user's, under its data directory)."""
    directory = settings.PANEL_DATA_DIR / "member-tls" / cluster.pk.hex
    owner = runas.current_user()
    runas.make_private_dir(directory, owner)
    write_client_files(cluster, directory, settings.PANEL_SUPERUSER, owner)
    cert, key = client_paths(directory)
    return {"sslcert": str(cert), "sslkey": str(key)}
