"""The member CA and its client certificates (pure): the same on every node from the same
secrets, a client certificate names its role and is signed by the CA, the CA is added once."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from panel.clusters.standbys.lib import member_tls

CA_SECRET, KEY_SECRET = "a1" * 32, "b2" * 32


def test_every_node_computes_the_same_files():
    assert member_tls.ca_pem(CA_SECRET, "db") == member_tls.ca_pem(CA_SECRET, "db")
    one = member_tls.client(CA_SECRET, "db", KEY_SECRET, "pgpanel_member")
    assert one == member_tls.client(CA_SECRET, "db", KEY_SECRET, "pgpanel_member")
    assert member_tls.ca_pem("c3" * 32, "db") != member_tls.ca_pem(CA_SECRET, "db")


def test_a_client_certificate_names_its_role_and_is_signed_by_the_member_ca():
    pair = member_tls.client(CA_SECRET, "db", KEY_SECRET, "pgpanel_member")
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    ca = x509.load_pem_x509_certificate(member_tls.ca_pem(CA_SECRET, "db").encode())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "pgpanel_member"
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)


def test_the_member_ca_is_added_to_a_servers_trusted_cas_once():
    ca = member_tls.ca_pem(CA_SECRET, "db")
    cluster_ca = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    once = member_tls.trusted_cas(cluster_ca, ca)
    assert once == cluster_ca + ca
    assert member_tls.trusted_cas(once, ca) == once
