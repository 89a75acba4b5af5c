"""The panel's etcd cluster (Patroni's consensus store): its members' argument lists, the
``initial-cluster`` they join, Patroni's ``etcd3`` section, the certificates of the panel's etcd
CA, and etcd's member list read. Pure: text and dataclasses in and out.

Every member listens on its node's private address (and 127.0.0.1) with TLS for clients and
peers, and lets in only a client or a peer whose certificate the panel's etcd CA signed
(``--client-cert-auth``, ``--peer-client-cert-auth``): anyone who reaches the port without one
cannot write Patroni's ``/config`` (an ``archive_command`` runs as the cluster's user).

A certificate alone opens no key: etcd's authentication is on, and every cluster's Patroni logs in
as a user of its own whose role reads and writes only its scope's prefix (``scope_permission``);
the panel logs in as ``root``. Every cluster's OS user holds a client certificate, so without
this one cluster's user could rewrite another's ``/config``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from panel.clusters.lib import tls

# One member up to two active nodes, three from three on: quorum (two of three) survives one.
SINGLE = 1
QUORUM = 3
CA_DAYS = 3650
CERT_DAYS = 3650


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True)
class Peer:
    """One member of the panel's etcd: its name (the node's), the address its peers and Patroni
    reach it at (the node's private address, else its address), and its two ports."""

    name: str
    host: str
    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"https://{_bracketed(self.host)}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"https://{_bracketed(self.host)}:{self.peer_port}"

    @property
    def client_host(self) -> str:
        """``host:port`` as Patroni's ``etcd3.hosts`` lists it."""
        return f"{_bracketed(self.host)}:{self.client_port}"


@dataclass(frozen=True)
class TlsPaths:
    """The files a member or a client reads: the panel's etcd CA, a certificate and its key; and
    the etcd user a client logs in as (empty: none, a member's own files or an etcd of a test)."""

    ca: str
    cert: str
    key: str
    user: str = ""
    password: str = field(default="", repr=False)


# The panel's own etcd user: etcd's built-in role of that name may do everything (users, roles,
# membership, every key). etcd refuses to enable authentication without it.
ROOT = "root"


def prefix_end(prefix: str) -> str:
    """The end of the key range of every key that starts with ``prefix`` (its last byte + 1)."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def scope_prefix(namespace: str, scope: str) -> str:
    """Every key of one Patroni scope (the slash keeps ``cluster-a`` from opening
    ``cluster-ab``)."""
    if not scope or "/" in scope:
        raise ValueError(f"not a Patroni scope: {scope!r}")
    return f"{namespace}{scope}/"


def initial_cluster(members: Sequence[Peer]) -> str:
    """etcd's ``--initial-cluster``: every member's name and peer URL."""
    if not members:
        raise ValueError("an etcd cluster has at least one member")
    return ",".join(f"{m.name}={m.peer_url}" for m in members)


def listen_urls(host: str, port: int) -> str:
    """The node's private address and loopback (the node's own Patroni and the panel): etcd
    binds both; only the private one is advertised (another node's loopback is not this one)."""
    hosts = [host] if host in ("127.0.0.1", "localhost") else [host, "127.0.0.1"]
    return ",".join(f"https://{_bracketed(h)}:{port}" for h in hosts)


def member_argv(
    program: str,
    me: Peer,
    members: Sequence[Peer],
    data_dir: str,
    tls: TlsPaths,
    *,
    joining: bool,
    bind: str | None = None,
) -> list[str]:
    """One member's etcd. ``joining``: it was added to a running cluster (``member add``) and
    starts empty (``initial-cluster-state=existing``); else it is the seed or restarts on its
    own data (etcd ignores ``initial-*`` then). ``members`` includes ``me``. ``bind``: the
    address it listens on when ``me.host`` is a name (etcd binds addresses only)."""
    if me not in members:
        raise ValueError(f"{me.name} is not one of the members it is started with")
    return [
        program,
        f"--name={me.name}",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={listen_urls(bind or me.host, me.client_port)}",
        f"--advertise-client-urls={me.client_url}",
        f"--listen-peer-urls={listen_urls(bind or me.host, me.peer_port).split(',')[0]}",
        f"--initial-advertise-peer-urls={me.peer_url}",
        f"--initial-cluster={initial_cluster(members)}",
        f"--initial-cluster-state={'existing' if joining else 'new'}",
        "--client-cert-auth",
        f"--trusted-ca-file={tls.ca}",
        f"--cert-file={tls.cert}",
        f"--key-file={tls.key}",
        "--peer-client-cert-auth",
        f"--peer-trusted-ca-file={tls.ca}",
        f"--peer-cert-file={tls.cert}",
        f"--peer-key-file={tls.key}",
        # A member cut off from the others asks whether it could win before it raises its term
        # (etcd 3.4's default is off): when its link comes back it joins the leader it finds,
        # instead of deposing it with the term it counted up alone (an election, every lease
        # renewed) as the machine-loss trials saw without it.
        "--pre-vote=true",
        # etcd 3.4 says nothing it refuses in its log without this (a client's bad certificate).
        "--logger=zap",
    ]


# What a running member must have been started with to be left running: ``initial-*`` is read
# only on an empty data directory, so a change there needs no restart; a member started before
# ``--pre-vote`` keeps running without it (restarting every member for it would cost the quorum
# more than it saves) and takes it at its next start.
def essential(argv: Sequence[str]) -> tuple[str, ...]:
    return tuple(a for a in argv if not a.startswith(("--initial-", "--pre-vote")))


def patroni_section(hosts: Sequence[str], tls: TlsPaths) -> dict[str, Any]:
    """Patroni's ``etcd3`` section: every member, over TLS with the cluster's client
    certificate. Patroni also learns the members from etcd itself (its member list, every
    ``ttl`` × 10 s and whenever a request fails on every member it knows)."""
    if not hosts:
        raise ValueError("Patroni needs at least one etcd member")
    section = {
        "hosts": list(hosts),
        "protocol": "https",
        "cacert": tls.ca,
        "cert": tls.cert,
        "key": tls.key,
    }
    if tls.user:
        # Patroni logs in with them (``/v3/auth/authenticate``), again whenever etcd says its
        # token is missing, expired or older than the users' last change.
        section.update(username=tls.user, password=tls.password)
    return section


@dataclass(frozen=True)
class EtcdMember:
    """A member as etcd's member list gives it: its id (hex, as ``etcdctl`` prints it), name
    (empty until a member added with ``member add`` has started), peer and client URLs."""

    id: str
    name: str
    peer_urls: tuple[str, ...]
    client_urls: tuple[str, ...]

    @property
    def started(self) -> bool:
        return bool(self.name)


def parse_members(text: str) -> list[EtcdMember]:
    """The JSON gateway's ``/v3/cluster/member/list`` (ids are decimal uint64 in strings)."""
    data = json.loads(text)
    return [
        EtcdMember(
            id=f"{int(item['ID']):x}",
            name=str(item.get("name", "")),
            peer_urls=tuple(item.get("peerURLs", ())),
            client_urls=tuple(item.get("clientURLs", ())),
        )
        for item in data.get("members", [])
    ]


def member_id_field(hex_id: str) -> str:
    """A member id as the gateway takes it in a request body (decimal)."""
    return str(int(hex_id, 16))


# --- the panel's etcd CA ---------------------------------------------------------------------------

ORGANIZATION = "PostgreSQL control panel etcd"


@dataclass(frozen=True)
class KeyPair:
    cert_pem: str
    key_pem: str


def new_ca(common_name: str = "pgpanel etcd CA") -> KeyPair:
    """The panel-wide CA that signs every member's and every client's certificate."""
    key = tls.new_key()
    cert = tls.ca_certificate(key, tls.name(common_name, ORGANIZATION), CA_DAYS)
    return KeyPair(tls.certificate_pem(cert), tls.private_key_pem(key))


def issue(ca: KeyPair, common_name: str, hosts: Sequence[str] = (), *, server: bool) -> KeyPair:
    """A certificate the CA signs. ``server``: a member's (server and peer: a peer is a client
    of the others too), naming ``hosts``; else a client's (Patroni, the panel), with no common
    name (``client_subject``): a client is who its etcd user is, never its certificate."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the etcd CA's key is not an EC key")
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if server:
        usages.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    key = tls.new_key()
    subject = tls.name(common_name, ORGANIZATION) if server else client_subject(common_name)
    cert = tls.leaf_certificate(
        ca_key, ca_cert.subject, key, subject, hosts=hosts, usages=usages, days=CERT_DAYS
    )
    return KeyPair(tls.certificate_pem(cert), tls.private_key_pem(key))


def client_subject(label: str) -> x509.Name:
    """A client's name without a common name: with authentication on, etcd 3.4's JSON gateway
    refuses every request that comes with a certificate naming one ("CommonName of client
    sending a request against gateway will be ignored"), and over gRPC it would take the common
    name as the user, no password asked. ``label`` goes in the organizational unit."""
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, label),
        ]
    )


def names_a_user(cert_pem: str) -> bool:
    """Whether the certificate has a common name (etcd would take it for a user name)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
    except ValueError:
        return False
    return bool(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME))


def signed_by(cert_pem: str, ca_cert_pem: str, hosts: Sequence[str] = ()) -> bool:
    """Whether ``cert_pem`` was signed by that CA, is valid for a week more and names every one
    of ``hosts`` (a node whose address changed needs a new one)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem.encode())
        ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    if cert.not_valid_after_utc < dt.datetime.now(dt.UTC) + dt.timedelta(days=7):
        return False
    return set(hosts) <= set(tls.subject_alt_names(cert_pem))
