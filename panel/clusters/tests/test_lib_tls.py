"""Cluster certificates: the server certificate names its hosts and verifies against the CA."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from panel.clusters.lib import tls

HOSTS = ["db.example.com", "localhost", "127.0.0.1", "::1"]


@pytest.fixture(scope="module")
def certs() -> tls.CertificateSet:
    return tls.generate("db-test", HOSTS)


def _verify(certs: tls.CertificateSet, subject: x509.DNSName | x509.IPAddress) -> None:
    ca = x509.load_pem_x509_certificate(certs.ca_cert_pem.encode())
    server = x509.load_pem_x509_certificate(certs.server_cert_pem.encode())
    verifier = PolicyBuilder().store(Store([ca])).time(dt.datetime.now(dt.UTC)).build_server_verifier(subject)
    chain = verifier.verify(server, [])
    assert chain[0] == server and chain[-1] == ca


def test_the_server_certificate_names_the_host_localhost_and_loopback(certs):
    names = tls.subject_alt_names(certs.server_cert_pem)
    assert {"db.example.com", "localhost", "127.0.0.1", "::1"} <= set(names)


@pytest.mark.parametrize(
    "subject",
    [
        x509.DNSName("db.example.com"),
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ],
)
def test_the_server_certificate_verifies_against_the_ca_for_each_host(certs, subject):
    _verify(certs, subject)


def test_another_host_name_does_not_verify(certs):
    with pytest.raises(VerificationError):
        _verify(certs, x509.DNSName("evil.example.com"))


def test_another_clusters_ca_does_not_verify(certs):
    other = tls.generate("db-other", HOSTS)
    mixed = tls.CertificateSet(other.ca_cert_pem, certs.server_cert_pem, certs.server_key_pem)
    with pytest.raises(VerificationError):
        _verify(mixed, x509.DNSName("localhost"))


def test_openssl_verifies_the_chain_and_the_host(certs, tmp_path):
    ca = tmp_path / "ca.crt"
    server = tmp_path / "server.crt"
    ca.write_text(certs.ca_cert_pem)
    server.write_text(certs.server_cert_pem)
    for flag, value in [("-verify_hostname", "db.example.com"), ("-verify_ip", "127.0.0.1")]:
        result = subprocess.run(
            ["openssl", "verify", "-CAfile", str(ca), "-purpose", "sslserver", flag, value, str(server)],
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith(": OK")


def test_the_key_matches_the_certificate_and_the_ca_is_a_ca(certs):
    server = x509.load_pem_x509_certificate(certs.server_cert_pem.encode())
    key = serialization.load_pem_private_key(certs.server_key_pem.encode(), password=None)
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(serialization.Encoding.PEM, pub) == server.public_key().public_bytes(
        serialization.Encoding.PEM, pub
    )
    ca = x509.load_pem_x509_certificate(certs.ca_cert_pem.encode())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert "PRIVATE KEY" not in certs.ca_cert_pem


def test_duplicate_host_names_are_listed_once():
    certs = tls.generate("db-test", ["localhost", "localhost", "127.0.0.1"])
    assert sorted(tls.subject_alt_names(certs.server_cert_pem)) == ["127.0.0.1", "localhost"]
