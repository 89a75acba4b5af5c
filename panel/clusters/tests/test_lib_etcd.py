"""The pure parts of the panel's etcd: a member's argument list and ``initial-cluster``, Patroni's
``etcd3`` section, the panel's etcd CA and the certificates it signs, etcd's member list read."""

from __future__ import annotations

import dataclasses
import json

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from panel.clusters.standbys.lib import etcd, patroni
from panel.clusters.tests.conftest import ha_cluster

A = etcd.Peer("node-a", "10.0.0.1", 25258, 25259)
B = etcd.Peer("node-b", "10.0.0.2", 25258, 25259)
C = etcd.Peer("node-c", "fd00::3", 26000, 26001)
TLS = etcd.TlsPaths("/d/etcd/tls/ca.crt", "/d/etcd/tls/server.crt", "/d/etcd/tls/server.key")


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").partition("=")[::2] for a in argv[1:])


def test_a_member_listens_on_its_private_address_and_loopback_with_tls_and_client_certificates():
    argv = etcd.member_argv("/usr/bin/etcd", A, [A, B, C], "/d/etcd/data", TLS, joining=False)
    flags = _flags(argv)
    assert argv[0] == "/usr/bin/etcd"
    assert flags["listen-client-urls"] == "https://10.0.0.1:25258,https://127.0.0.1:25258"
    # Only the private address is advertised: another node's loopback is not this one.
    assert flags["advertise-client-urls"] == "https://10.0.0.1:25258"
    assert flags["listen-peer-urls"] == flags["initial-advertise-peer-urls"] == "https://10.0.0.1:25259"
    assert flags["initial-cluster"] == (
        "node-a=https://10.0.0.1:25259,node-b=https://10.0.0.2:25259,node-c=https://[fd00::3]:26001"
    )
    assert flags["initial-cluster-state"] == "new"
    # Clients and peers without a certificate of the panel's CA are refused.
    assert "client-cert-auth" in flags and "peer-client-cert-auth" in flags
    assert flags["trusted-ca-file"] == flags["peer-trusted-ca-file"] == TLS.ca
    assert (flags["cert-file"], flags["key-file"]) == (TLS.cert, TLS.key)
    assert (flags["peer-cert-file"], flags["peer-key-file"]) == (TLS.cert, TLS.key)
    assert not any(a.startswith("http://") or "=http://" in a for a in argv)
    # A member whose link comes back does not depose the leader with the term it counted alone.
    assert flags["pre-vote"] == "true"


def test_a_newcomer_joins_the_existing_cluster_and_a_loopback_node_binds_once():
    local = etcd.Peer("solo", "127.0.0.1", 25258, 25259)
    argv = etcd.member_argv("/usr/bin/etcd", local, [A, local], "/d", TLS, joining=True)
    flags = _flags(argv)
    assert flags["initial-cluster-state"] == "existing"
    assert flags["listen-client-urls"] == "https://127.0.0.1:25258"
    assert flags["initial-cluster"] == "node-a=https://10.0.0.1:25259,solo=https://127.0.0.1:25259"
    named = etcd.Peer("node-d", "db4.example.net", 25258, 25259)
    flags = _flags(
        etcd.member_argv("/usr/bin/etcd", named, [named], "/d", TLS, joining=False, bind="10.0.0.4")
    )
    assert flags["listen-client-urls"] == "https://10.0.0.4:25258,https://127.0.0.1:25258"
    assert flags["advertise-client-urls"] == "https://db4.example.net:25258"
    with pytest.raises(ValueError):
        etcd.member_argv("/usr/bin/etcd", A, [B], "/d", TLS, joining=True)


def test_a_change_of_initial_cluster_alone_needs_no_restart():
    one = etcd.member_argv("/usr/bin/etcd", A, [A], "/d", TLS, joining=False)
    three = etcd.member_argv("/usr/bin/etcd", A, [A, B, C], "/d", TLS, joining=True)
    assert etcd.essential(one) == etcd.essential(three)
    # A member started before pre-vote is left running: every member restarted at once for it
    # would cost the quorum.
    assert etcd.essential([a for a in one if not a.startswith("--pre-vote")]) == etcd.essential(one)
    moved = dataclasses.replace(A, host="10.0.0.9")
    assert etcd.essential(etcd.member_argv("/usr/bin/etcd", moved, [moved], "/d", TLS, joining=False)) != (
        etcd.essential(one)
    )


def _cluster(client: etcd.TlsPaths | None = None) -> patroni.HaCluster:
    return ha_cluster(
        etcd_hosts=(A.client_host, B.client_host, C.client_host),
        members=(patroni.Member("member-1", 27000, 27001, "/d/1"),),
        etcd_tls=client,
    )


def test_patroni_lists_every_member_over_tls_with_the_clusters_client_certificate():
    client = etcd.TlsPaths("/c/ha/etcd-ca.crt", "/c/ha/etcd-client.crt", "/c/ha/etcd-client.key")
    cluster = _cluster(client)
    config = json.loads(patroni.render_member(cluster, cluster.members[0], "/p"))
    assert config["etcd3"] == {
        "hosts": ["10.0.0.1:25258", "10.0.0.2:25258", "[fd00::3]:26000"],
        "protocol": "https",
        "cacert": "/c/ha/etcd-ca.crt",
        "cert": "/c/ha/etcd-client.crt",
        "key": "/c/ha/etcd-client.key",
    }
    assert "etcd_user" not in config["tags"]
    with pytest.raises(ValueError):
        etcd.patroni_section([], client)


def test_patroni_logs_in_as_its_scopes_etcd_user_and_says_so_in_a_tag():
    client = etcd.TlsPaths(
        "/c/ha/etcd-ca.crt", "/c/ha/etcd-client.crt", "/c/ha/etcd-client.key", "cluster-x", "pw"
    )
    section = etcd.patroni_section([A.client_host], client)
    assert (section["username"], section["password"]) == ("cluster-x", "pw")
    assert "pw" not in repr(client)
    config = patroni.member_config(
        dataclasses.replace(_cluster(), etcd_tls=client),
        patroni.Member("member-1", 27000, 27001, "/d/1"),
        "/p",
    )
    assert config["tags"] == {"etcd_user": "cluster-x"}


def test_a_scopes_prefix_covers_its_keys_only():
    prefix = etcd.scope_prefix("/pgpanel/", "cluster-a")
    assert prefix == "/pgpanel/cluster-a/"
    end = etcd.prefix_end(prefix)
    assert prefix <= "/pgpanel/cluster-a/config" < end
    assert not prefix <= "/pgpanel/cluster-ab/config" < end
    for bad in ("", "a/b"):
        with pytest.raises(ValueError):
            etcd.scope_prefix("/pgpanel/", bad)


def test_the_ca_signs_server_and_client_certificates_and_another_cas_are_not_taken():
    ca = etcd.new_ca()
    server = etcd.issue(ca, "node-a", ["10.0.0.1", "127.0.0.1", "localhost"], server=True)
    client = etcd.issue(ca, "node-a client", server=False)
    assert etcd.signed_by(server.cert_pem, ca.cert_pem, ["10.0.0.1", "127.0.0.1"])
    assert not etcd.signed_by(server.cert_pem, ca.cert_pem, ["10.0.0.2"])  # the address changed
    assert etcd.signed_by(client.cert_pem, ca.cert_pem)
    assert not etcd.signed_by(client.cert_pem, etcd.new_ca().cert_pem)
    assert not etcd.signed_by("", ca.cert_pem)
    usages = x509.load_pem_x509_certificate(server.cert_pem.encode()).extensions.get_extension_for_class(
        x509.ExtendedKeyUsage
    )
    # A member is its peers' client too.
    assert set(usages.value) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    # A client has no common name: etcd would take it for a user (and its JSON gateway refuses it).
    assert etcd.names_a_user(server.cert_pem) and not etcd.names_a_user(client.cert_pem)
    client_usages = x509.load_pem_x509_certificate(client.cert_pem.encode()).extensions
    assert list(client_usages.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]


def test_it_reads_etcds_member_list():
    # POST /v3/cluster/member/list of etcd 3.4.23 (this machine): a learner added, not started yet.
    text = (
        '{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437",'
        '"raft_term":"2"},"members":[{"ID":"10276657743932975437","name":"node-a",'
        '"peerURLs":["https://127.0.0.1:25259"],"clientURLs":["https://127.0.0.1:25258"]},'
        '{"ID":"3297035539436546347","peerURLs":["https://127.0.0.1:25239"],"isLearner":true}]}'
    )
    first, second = etcd.parse_members(text)
    assert (first.id, first.name, first.started) == ("8e9e05c52164694d", "node-a", True)
    assert first.client_urls == ("https://127.0.0.1:25258",)
    assert (second.name, second.started, second.peer_urls) == ("", False, ("https://127.0.0.1:25239",))
    assert etcd.member_id_field(second.id) == "3297035539436546347"
