"""Trusted sources, the managed service's database firewall: which addresses may connect to a
cluster over TCP (pure, no Django).

A cluster with no trusted source accepts every address (still only over TLS, with a password);
with some, its server and its pooler accept only those. A source is one IP address or one network
in CIDR notation, IPv4 or IPv6. Host names are refused: PgBouncer's hba file cannot hold them, and
a firewall that follows DNS changes under its owner's feet.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from panel.core.errors import N_, CodedError

# The managed service's own limit on rules per cluster.
MAX_SOURCES = 100
# Written for "every address" when a cluster has no trusted source.
EVERY_ADDRESS = ("0.0.0.0/0", "::/0")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class InvalidSource(CodedError, ValueError):
    """A trusted source that cannot be used; the message is for the user (a template and its
    parameters, rendered in the user's language)."""

    def __init__(self, message: str, **params: object) -> None:
        super().__init__(message, code="firewall.source_invalid", params=params)


def parse_source(value: str) -> Network:
    """The network ``value`` names: an address is a network of one (``/32`` or ``/128``)."""
    text = value.strip()
    if not text:
        raise InvalidSource(N_("Enter an IP address or a network."))
    if "%" in text:
        # A zone id (fe80::1%eth0) means something on this machine only; pg_hba.conf refuses it.
        raise InvalidSource(
            N_("“%(text)s”: an address with a zone id (%%) cannot be a trusted source."), text=text
        )
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        if "has host bits set" in str(exc):
            wider = ipaddress.ip_network(text, strict=False)
            raise InvalidSource(
                N_(
                    "“%(text)s” is not a network address: its host bits are set. "
                    "Did you mean %(network)s (the whole network) or %(address)s (one address)?"
                ),
                text=text,
                network=str(wider),
                address=text.split("/")[0],
            ) from None
        raise InvalidSource(
            N_(
                "“%(text)s” is neither an IP address nor a network in CIDR notation "
                "(such as 203.0.113.7, 203.0.113.0/24 or 2001:db8::/32); host names are not supported."
            ),
            text=text,
        ) from None
    if isinstance(network, ipaddress.IPv6Network) and network.network_address.ipv4_mapped is not None:
        # PostgreSQL matches an IPv4 client against IPv4 rules only, so ::ffff:a.b.c.d would never match.
        raise InvalidSource(N_("“%(text)s” is an IPv4 address written as IPv6: write it as IPv4."), text=text)
    return network


def display(network: Network) -> str:
    """How a source is shown and stored: a single address without its prefix length."""
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def normalize(values: Iterable[str]) -> list[str]:
    """The sources in their stored form, in the order given, each once; ``InvalidSource`` for the
    first that cannot be used or past ``MAX_SOURCES``."""
    seen: dict[str, None] = {}
    for value in values:
        seen.setdefault(display(parse_source(value)), None)
    if len(seen) > MAX_SOURCES:
        raise InvalidSource(
            N_("A cluster can have at most %(max)s trusted sources; this list has %(count)s."),
            max=MAX_SOURCES,
            count=len(seen),
        )
    return list(seen)


def networks(sources: Sequence[str]) -> list[Network]:
    """What the hba lines are written for: the sources, or every address when there are none."""
    return [parse_source(source) for source in (sources or EVERY_ADDRESS)]


def allows(sources: Sequence[str], address: str) -> bool:
    """Whether a client at ``address`` may connect (every address when there is no source)."""
    if not sources:
        return True
    try:
        client = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if isinstance(client, ipaddress.IPv6Address) and client.ipv4_mapped is not None:
        client = client.ipv4_mapped
    return any(client in network for network in networks(sources))


def hba_lines(sources: Sequence[str], *, connection_type: str, method: str) -> list[str]:
    """One ``<type> all all <network> <method>`` line per source (pg_hba.conf and PgBouncer's
    hba file read the same): the lines that let the trusted sources in. Whatever no line
    matches is rejected by both."""
    return [f"{connection_type} all all {network.with_prefixlen} {method}" for network in networks(sources)]


# HAProxy lets the machine itself in whatever the sources (a process on this machine could reach a
# member's own port on loopback anyway; only such a process can come from a loopback address, Linux
# drops such packets from outside). What comes through HAProxy reaches the members from
# ``HAPROXY_SOURCE`` and so is a tenant's client whatever its own address: no panel role.
HAPROXY_ALWAYS = ("127.0.0.1/32",)

# The address HAProxy connects to the members on its node from (its servers' ``source``): Linux
# lets a process bind any address of 127.0.0.0/8 without configuring it. The members' pg_hba.conf
# refuses every panel role from it before any other line, so whoever reaches a cluster's public
# port, from wherever, is never asked a panel role's password. A process binding it itself gains
# nothing: the address only takes rights away.
HAPROXY_SOURCE = "127.0.5.1"


def render_haproxy_sources(sources: Sequence[str]) -> str:
    """HAProxy's pattern file for a cluster with standbys (``src -f``): one network per line, the
    sources (and ``HAPROXY_ALWAYS``) or every address when there are none. An empty or missing
    file lets nobody in."""
    lines = ["# Written by the control panel: the cluster's trusted sources; edits here are overwritten."]
    lines += [network.with_prefixlen for network in networks(sources)]
    if sources:
        lines += [network for network in HAPROXY_ALWAYS if network not in lines]
    return "\n".join(lines) + "\n"


# Members sharing a node reach each other (and HAProxy, PgBouncer and the panel reach them) here.
LOOPBACK = "127.0.0.1/32"
_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")


def host_network(address: str) -> str:
    """A node's address as pg_hba.conf's address field: an IP address as a network of that one
    host; a host name as it is (PostgreSQL admits a client whose address resolves back and forth
    to it). ``ValueError`` for anything else: it would be read as another field or a keyword."""
    text = address.strip()
    try:
        return ipaddress.ip_network(ipaddress.ip_address(text)).with_prefixlen  # /32 or /128
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(text) or text.lower() in {"all", "samehost", "samenet"}:
        raise ValueError(f"not a node address for pg_hba.conf: {address!r}")
    return text


def _networks_besides_loopback(addresses: Iterable[str]) -> list[str]:
    found = dict.fromkeys(host_network(address) for address in addresses if address.strip())
    return [network for network in found if network != LOOPBACK]


def member_hba_lines(superuser: str, member_addresses: Sequence[str]) -> list[str]:
    """What lets the members of one cluster stream from and rewind against each other: the roles
    ``superuser`` names (a pg_hba.conf list: the members' role, Patroni's replication and rewind
    user, and the panel's superuser, which reaches a member on another node over TCP) into
    ``replication`` and the maintenance database ``postgres`` (pg_rewind's), with a password, from
    loopback (members sharing a node) and over TLS from the addresses of the nodes holding this
    cluster's members, nothing else. The tenant's trusted sources never widen these lines, and no
    tenant role matches them.

    A node's address is also where HAProxy on that node reaches the members of other nodes from,
    with whatever client came to the cluster's public port: from there a password alone is not
    enough. The client must show a certificate of the cluster's member CA issued to the role
    (``clientcert=verify-full``, ``lib.member_tls``), or it is refused before any password is
    asked."""
    lines = [
        f"host    replication  {superuser}  {LOOPBACK}  scram-sha-256",
        f"host    postgres  {superuser}  {LOOPBACK}  scram-sha-256",
    ]
    for network in _networks_besides_loopback(member_addresses):
        lines += [
            f"hostssl replication  {superuser}  {network}  scram-sha-256  {MEMBER_CERTIFICATE}",
            f"hostssl postgres  {superuser}  {network}  scram-sha-256  {MEMBER_CERTIFICATE}",
        ]
    return lines


MEMBER_CERTIFICATE = "clientcert=verify-full"


def proxy_networks(cluster_node_addresses: Sequence[str]) -> list[str]:
    """Where a member's TCP clients come from when the cluster has standbys: HAProxy (which alone
    applies the trusted sources; ``HAPROXY_SOURCE`` for a member on its node) on every node that
    holds a member (the cluster's entries), PgBouncer and the panel on the cluster's node:
    loopback, and those nodes' addresses for a member on another node."""
    return [f"{HAPROXY_SOURCE}/32", LOOPBACK, *_networks_besides_loopback(cluster_node_addresses)]


_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def panel_roles_refused(roles: Sequence[str], address: str) -> str:
    """The pg_hba.conf line that refuses every role in ``roles`` (the panel's) over TCP from
    ``address`` (``all``: from anywhere), for a database and for a replication connection alike
    (``all`` alone does not match ``replication``). PostgreSQL answers "pg_hba.conf rejects
    connection" before it asks for any password."""
    names = list(dict.fromkeys(roles))
    for name in names:
        if not _ROLE_NAME.fullmatch(name):
            raise ValueError(f"not a role name for pg_hba.conf: {name!r}")
    return f"host    all,replication  {','.join(names)}  {address}  reject"
