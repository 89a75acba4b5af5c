"""Host names and addresses of the attach form: canonical forms, refusals, and the addresses an
account that is not staff may not make the panel connect to."""

from __future__ import annotations

import ipaddress

import pytest

from panel.clusters.lib.hosts import InvalidHost, forbidden_reason, validate_host


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("db.example.com", "db.example.com"),
        ("DB.Example.COM.", "db.example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        ("192.0.2.10", "192.0.2.10"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("localhost", "localhost"),
        ("db_1.internal", "db_1.internal"),
    ],
)
def test_it_returns_the_canonical_host(text: str, canonical: str) -> None:
    assert validate_host(text) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (".", "Enter a host name"),
        ("", "Enter a host name"),
        ("a..b", "empty part"),
        (".a", "empty part"),
        ("a" * 64 + ".com", "not a valid part"),
        (".".join(["x" * 63] * 4), "at most 253"),
        ("a b", "spaces"),
        ("/var/run/postgresql", "socket directory"),
        ("db1,db2", "not a socket directory or a list"),
        ("127.1", "four decimal numbers"),
        ("2130706433", "four decimal numbers"),
        ("0x7f.1", "four decimal numbers"),
        ("-db.example.com", "not a valid part"),
        ("[::1", "not a valid IPv6"),
        ("\u2488.com", "not a valid part"),
    ],
)
def test_it_refuses_what_is_not_one_host(text: str, message: str) -> None:
    with pytest.raises(InvalidHost, match=message):
        validate_host(text)


LOCAL = {ipaddress.ip_address("192.0.2.2"), ipaddress.ip_address("127.0.0.1")}
PORTS = (25060, 25259)


@pytest.mark.parametrize(
    ("address", "port", "reason"),
    [
        ("127.0.0.1", 5432, "loopback"),
        ("127.8.9.10", 5432, "loopback"),
        ("::1", 5432, "loopback"),
        ("::ffff:127.0.0.1", 5432, "loopback"),
        ("169.254.169.254", 80, "link-local"),
        ("fe80::1", 5432, "link-local"),
        ("0.0.0.0", 5432, "unspecified"),
        ("::", 5432, "unspecified"),
        ("224.0.0.1", 5432, "multicast"),
        ("240.0.0.1", 5432, "reserved"),
        ("192.0.2.2", 25060, "panel's own clusters"),
        ("192.0.2.2", 25259, "panel's own clusters"),
    ],
)
def test_it_names_why_an_address_is_forbidden(address: str, port: int, reason: str) -> None:
    found = forbidden_reason(ipaddress.ip_address(address), port, local_addresses=LOCAL, panel_ports=PORTS)
    assert found is not None and reason in found


@pytest.mark.parametrize(
    ("address", "port"),
    [
        ("192.0.2.2", 5432),
        ("192.0.2.2", 25261),
        ("198.51.100.7", 25060),
        ("10.1.2.3", 5432),
        ("2001:db8::5", 5432),
    ],
)
def test_other_addresses_and_ports_are_allowed(address: str, port: int) -> None:
    assert (
        forbidden_reason(ipaddress.ip_address(address), port, local_addresses=LOCAL, panel_ports=PORTS)
        is None
    )
