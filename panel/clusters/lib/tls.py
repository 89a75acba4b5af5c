"""A certificate authority and server certificates for cluster TLS (pure, no Django); its
building blocks (a CA, a certificate it signs, the names in one) serve the panel's etcd CA too."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "PostgreSQL control panel"


@dataclass(frozen=True)
class CertificateSet:
    """PEM texts: the CA certificate (shown to users) and the server's key pair."""

    ca_cert_pem: str
    server_cert_pem: str
    server_key_pem: str


def name(common_name: str, organization: str = ORGANIZATION) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def alt_names(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    """Each host once: an address as an IP entry, anything else as a DNS name."""
    entries: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            entries.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(entries)


def private_key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def certificate_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def ca_builder(
    key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    *,
    serial: int,
    not_before: dt.datetime,
    not_after: dt.datetime,
    digital_signature: bool = True,
) -> x509.CertificateBuilder:
    """A self-signed CA that signs leaf certificates only (path length 0), to be signed by ``key``."""
    usage = x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(serial)
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def ca_certificate(key: ec.EllipticCurvePrivateKey, subject: x509.Name, days: int) -> x509.Certificate:
    """A self-signed CA certificate that signs leaf certificates only (path length 0)."""
    now = dt.datetime.now(dt.UTC)
    builder = ca_builder(
        key,
        subject,
        serial=x509.random_serial_number(),
        not_before=now - dt.timedelta(minutes=5),
        not_after=now + dt.timedelta(days=days),
    )
    return builder.sign(key, hashes.SHA256())


def leaf_certificate(
    ca_key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    *,
    hosts: Sequence[str],
    usages: Sequence[x509.ObjectIdentifier],
    days: int,
) -> x509.Certificate:
    """A certificate the CA (its key and name) signs for ``key``: the extended key ``usages``
    given, naming ``hosts`` (none: no subject alternative names)."""
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if hosts:
        builder = builder.add_extension(alt_names(hosts), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def generate(cluster_name: str, hostnames: list[str], *, days: int = 3650) -> CertificateSet:
    """A fresh CA for one cluster, and a server certificate it signs naming every host given."""
    ca_key = new_key()
    ca_name = name(f"{cluster_name} CA")
    ca_cert = ca_certificate(ca_key, ca_name, days)
    server_key = new_key()
    server_cert = leaf_certificate(
        ca_key,
        ca_name,
        server_key,
        name(hostnames[0]),
        hosts=hostnames,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
        days=days,
    )
    return CertificateSet(
        ca_cert_pem=certificate_pem(ca_cert),
        server_cert_pem=certificate_pem(server_cert),
        server_key_pem=private_key_pem(server_key),
    )


def subject_alt_names(cert_pem: str) -> list[str]:
    """The DNS names and addresses a certificate names (none without the extension)."""
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(v) for v in san.get_values_for_type(x509.DNSName)] + [
        str(v) for v in san.get_values_for_type(x509.IPAddress)
    ]
