"""Trusted sources as values: what is accepted, how it is stored, who it lets in (pure unit tests)."""

from __future__ import annotations

import pytest

from panel.clusters.lib import firewall


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("203.0.113.7", "203.0.113.7"),
        (" 203.0.113.7 ", "203.0.113.7"),
        ("203.0.113.7/32", "203.0.113.7"),
        ("203.0.113.0/24", "203.0.113.0/24"),
        ("0.0.0.0/0", "0.0.0.0/0"),
        ("2001:DB8::1", "2001:db8::1"),
        ("2001:db8:0:0::/64", "2001:db8::/64"),
        ("::1/128", "::1"),
    ],
)
def test_a_source_is_stored_in_one_spelling(typed, stored):
    assert firewall.normalize([typed]) == [stored]


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("", "Enter an IP address"),
        ("db.example.com", "host names are not supported"),
        ("203.0.113.256", "neither an IP address"),
        ("203.0.113.0/33", "neither an IP address"),
        ("203.0.113.0/24 trust", "neither an IP address"),
        ("10.0.0.0/8\nlocal all all trust", "neither an IP address"),
        ("all", "neither an IP address"),
        ("fe80::1%eth0", "zone id"),
        ("::ffff:203.0.113.7", "write it as IPv4"),
    ],
)
def test_anything_but_an_address_or_network_is_refused_saying_why(typed, words):
    with pytest.raises(firewall.InvalidSource, match=words):
        firewall.normalize([typed])


def test_a_network_with_host_bits_names_both_readings():
    with pytest.raises(firewall.InvalidSource) as refused:
        firewall.normalize(["10.1.2.3/8"])
    assert "10.0.0.0/8" in str(refused.value) and "10.1.2.3 (one address)" in str(refused.value)


def test_duplicates_are_kept_once_in_the_order_given():
    assert firewall.normalize(["10.0.0.0/8", "203.0.113.7/32", "10.0.0.0/8", "203.0.113.7"]) == [
        "10.0.0.0/8",
        "203.0.113.7",
    ]


def test_at_most_one_hundred_sources():
    hundred = [f"10.0.{i}.0/24" for i in range(firewall.MAX_SOURCES)]
    assert len(firewall.normalize(hundred)) == firewall.MAX_SOURCES
    with pytest.raises(firewall.InvalidSource, match="at most 100"):
        firewall.normalize([*hundred, "203.0.113.7"])


def test_no_source_lets_every_address_in():
    assert firewall.allows([], "198.51.100.1")
    assert firewall.allows([], "2001:db8::5")


def test_sources_let_in_their_addresses_only():
    sources = ["203.0.113.0/24", "2001:db8::/32", "198.51.100.9"]
    assert firewall.allows(sources, "203.0.113.200")
    assert firewall.allows(sources, "2001:db8:ffff::1")
    assert firewall.allows(sources, "198.51.100.9")
    # An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
    assert firewall.allows(sources, "::ffff:203.0.113.5")
    assert not firewall.allows(sources, "198.51.100.10")
    assert not firewall.allows(sources, "127.0.0.1")
    assert not firewall.allows(sources, "::1")
    assert not firewall.allows(sources, "not an address")


def test_hba_lines_name_every_network_with_its_prefix_length():
    lines = firewall.hba_lines(
        ["203.0.113.7", "2001:db8::/32"], connection_type="hostssl", method="scram-sha-256"
    )
    assert lines == [
        "hostssl all all 203.0.113.7/32 scram-sha-256",
        "hostssl all all 2001:db8::/32 scram-sha-256",
    ]


def test_hba_lines_without_sources_cover_both_address_families():
    lines = firewall.hba_lines([], connection_type="hostssl", method="scram-sha-256")
    assert lines == ["hostssl all all 0.0.0.0/0 scram-sha-256", "hostssl all all ::/0 scram-sha-256"]
