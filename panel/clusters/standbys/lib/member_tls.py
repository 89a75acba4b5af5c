"""The certificates that let a cluster's own logins in between nodes (pure, no Django).

A member on another node is reached at its node's address, the address HAProxy on that node
comes from too: a password alone would let anyone who reaches the cluster's public port be asked
for the members' role's (or the superuser's) password. The members' pg_hba.conf lines for other
nodes' addresses ask for a client certificate as well (``clientcert=verify-full``: issued by the
cluster's member CA, its common name the role's), which only the cluster's Patroni (the members'
role) and the panel (its superuser) hold.

Every key here is derived from a secret the caller gives (the panel's ``derived_secret``), the
certificates are signed deterministically and dated alike: every node computes the same files,
so no key travels between nodes and a file is rewritten only when it differs."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from panel.clusters.lib import tls

# P-256's group order: a derived scalar is taken below it.
_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
NOT_BEFORE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
NOT_AFTER = dt.datetime(2124, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class KeyPair:
    """PEM texts: a certificate and its private key."""

    cert_pem: str
    key_pem: str


def derived_key(secret: str) -> ec.EllipticCurvePrivateKey:
    """The P-256 key of a hexadecimal ``secret`` (at least 256 bits of it)."""
    if len(secret) < 64:
        raise ValueError("a derived key needs a secret of 256 bits")
    return ec.derive_private_key(int(secret, 16) % (_ORDER - 1) + 1, ec.SECP256R1())


def _serial(secret: str) -> int:
    return int(secret[:38], 16) >> 1 or 1  # positive, under 2**151


def _sign(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    return builder.sign(key, hashes.SHA256(), ecdsa_deterministic=True)


def ca(secret: str, label: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The cluster's member CA: signs client certificates only (path length 0). ``label``
    names it: the cluster's id, which never changes (a name that did would make another CA,
    which the members' copies of the first would not know)."""
    key = derived_key(secret)
    subject = tls.name(f"members CA {label}")
    builder = tls.ca_builder(
        key,
        subject,
        serial=_serial(secret),
        not_before=NOT_BEFORE,
        not_after=NOT_AFTER,
        digital_signature=False,
    )
    return key, _sign(builder, key)


def ca_pem(secret: str, label: str) -> str:
    return tls.certificate_pem(ca(secret, label)[1])


def client(ca_secret: str, label: str, key_secret: str, role: str) -> KeyPair:
    """A client certificate for ``role`` (its common name: what ``clientcert=verify-full``
    compares with the role logging in) signed by the cluster's member CA."""
    ca_key, ca_cert = ca(ca_secret, label)
    key = derived_key(key_secret)
    builder = (
        x509.CertificateBuilder()
        .subject_name(tls.name(role))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(_serial(key_secret))
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    return KeyPair(tls.certificate_pem(_sign(builder, ca_key)), tls.private_key_pem(key))


def trusted_cas(current: str, member_ca_pem: str) -> str:
    """A server's ``ssl_ca_file`` text: what it trusts now (the cluster's CA), with the member
    CA once at its end."""
    if member_ca_pem in current:
        return current
    return current.rstrip("\n") + "\n" + member_ca_pem
