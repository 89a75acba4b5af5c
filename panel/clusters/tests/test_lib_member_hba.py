"""pg_hba.conf of a cluster whose members are on separate machines (pure): the panel's superuser
streams and rewinds over TLS from the nodes holding this cluster's members and nowhere else; the
tenant's trusted sources do not widen those lines and no tenant role matches them; TCP clients
come only from loopback and the cluster's node (HAProxy, PgBouncer, the panel)."""

from __future__ import annotations

import ipaddress

import pytest

from panel.clusters.lib import firewall
from panel.clusters.lib.pgconf import render_hba

NODE_A, NODE_B, NODE_B_PRIVATE = "10.0.0.1", "10.0.0.2", "192.168.7.2"


def _spread(sources: list[str] | None = None) -> str:
    return render_hba(
        "pgpanel",
        "pgpanel_monitor",
        sources or [],
        "pgpanel_replication",
        members_from=[NODE_A, "", NODE_B, NODE_B_PRIVATE],
        clients_from=firewall.proxy_networks([NODE_A, ""]),
        member_role="pgpanel_member",
    )


def _decision(text: str, *, database: str, user: str, address: str, ssl: bool = True) -> str:
    """What PostgreSQL does with a TCP connection: the method of the first line whose type,
    database, user and address match (a host name never matches here), or "reject"."""
    client = ipaddress.ip_address(address)
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#") or fields[0] == "local":
            continue
        kind, rule_database, rule_user, rule_address = fields[:4]
        method = " ".join(fields[4:])  # with its options (clientcert=…)
        if kind == "hostssl" and not ssl:
            continue
        databases, users = set(rule_database.split(",")), set(rule_user.split(","))
        if database == "replication":
            databases.discard("all")  # "all" does not match a replication connection
        if not databases & {"all", database} or not users & {"all", user}:
            continue
        if rule_address != "all" and client not in ipaddress.ip_network(rule_address):
            continue
        return method
    return "reject"


def test_the_superuser_streams_and_rewinds_over_tls_from_this_clusters_member_nodes_only():
    text = _spread()
    # From another node's address (where that node's HAProxy comes from too) with the member
    # CA's certificate of the role as well as its password; from loopback with the password.
    for node in (NODE_A, NODE_B, NODE_B_PRIVATE):
        for database in ("replication", "postgres"):
            for user in ("pgpanel", "pgpanel_member"):
                decision = _decision(text, database=database, user=user, address=node)
                assert decision == "scram-sha-256 clientcert=verify-full"
    for database in ("replication", "postgres"):
        assert _decision(text, database=database, user="pgpanel", address="127.0.0.1") == "scram-sha-256"
    assert (
        f"hostssl replication  pgpanel,pgpanel_member  {NODE_B}/32  scram-sha-256  clientcert=verify-full"
        in text
    )
    assert (
        f"hostssl postgres  pgpanel,pgpanel_member  {NODE_B_PRIVATE}/32  scram-sha-256  clientcert=verify-full"
        in text
    )
    # Without TLS from another node, from a node holding none of its members, into a tenant's
    # database: refused.
    assert _decision(text, database="replication", user="pgpanel", address=NODE_B, ssl=False) == "reject"
    assert _decision(text, database="replication", user="pgpanel", address="10.0.0.3") == "reject"
    assert _decision(text, database="defaultdb", user="pgpanel", address=NODE_B) == "reject"


def test_trusted_sources_do_not_widen_the_member_lines_nor_admit_doadmin_from_a_member_node():
    wide = _spread(["0.0.0.0/0", "10.0.0.0/8"])
    assert wide == _spread()  # behind HAProxy the sources are HAProxy's to apply
    for database in ("replication", "postgres"):
        assert _decision(wide, database=database, user="pgpanel", address="10.0.0.3") == "reject"
    # The tenant's admin from node B (a member node that is not the cluster's) is not let in:
    # neither by the member lines nor as a client.
    assert _decision(wide, database="replication", user="doadmin", address=NODE_B) == "reject"
    assert _decision(wide, database="defaultdb", user="doadmin", address=NODE_B) == "reject"
    assert _decision(wide, database="defaultdb", user="doadmin", address="203.0.113.9") == "reject"
    # From the cluster's node (HAProxy, PgBouncer) and loopback it is, over TLS.
    assert _decision(wide, database="defaultdb", user="doadmin", address=NODE_A) == "scram-sha-256"
    assert _decision(wide, database="defaultdb", user="doadmin", address="127.0.0.1") == "scram-sha-256"
    assert _decision(wide, database="defaultdb", user="doadmin", address=NODE_A, ssl=False) == "reject"


def test_members_sharing_one_node_keep_the_loopback_lines_of_before():
    text = render_hba("pgpanel", "pgpanel_monitor", [], "pgpanel_replication", members_from=["127.0.0.1"])
    assert "hostssl replication  pgpanel " not in text
    assert "host    replication  pgpanel  127.0.0.1/32  scram-sha-256" in text
    assert "host    postgres  pgpanel  127.0.0.1/32  scram-sha-256" in text


@pytest.mark.parametrize(
    "bad", ["all", "samenet", "10.0.0.0 trust", "10.0.0.0/8", "a b", "-x", "10.0.0.1\nhost all"]
)
def test_an_address_that_would_read_as_another_field_is_refused(bad):
    with pytest.raises(ValueError):
        firewall.host_network(bad)


def test_a_node_named_by_its_host_name_is_written_as_that_name():
    assert firewall.host_network("db-2.example.net") == "db-2.example.net"
    assert firewall.host_network("2001:db8::7") == "2001:db8::7/128"


@pytest.mark.parametrize("user", ["pgpanel", "pgpanel_replication", "pgpanel_monitor", "pgpanel_migrate"])
@pytest.mark.parametrize("database", ["replication", "postgres", "defaultdb"])
def test_no_panel_role_comes_in_through_haproxy(user: str, database: str) -> None:
    text = render_hba(
        "pgpanel",
        "pgpanel_monitor",
        [],
        "pgpanel_replication",
        members_from=["127.0.0.1"],
        clients_from=firewall.proxy_networks(["127.0.0.1"]),
        panel_roles=["pgpanel_migrate"],
    )
    assert _decision(text, database=database, user=user, address=firewall.HAPROXY_SOURCE) == "reject"
    # A tenant's role does come in that way (HAProxy is how clients reach the members).
    assert (
        _decision(text, database="defaultdb", user="doadmin", address=firewall.HAPROXY_SOURCE)
        == "scram-sha-256"
    )
    # The members stream and rewind from loopback as before.
    assert _decision(text, database="replication", user="pgpanel", address="127.0.0.1") == "scram-sha-256"
