"""Where a tenant may make the panel connect: log sinks, migration sources and servers attached by
accounts that are not staff name a host, and the panel opens a connection there from its own
machines, so the host must not be one of them.

Refused on every port: loopback, link-local, unspecified, multicast and reserved addresses
(``hosts.forbidden_reason``), every address of this machine's interfaces (not only loopback: a
service bound to the machine's own public address answers the panel as well), and every address
of a registered node (its public and private addresses and its agent's host, resolved). An
operator who runs a receiver on one of those lists its network in the feature's setting
(``allowed``); the ports of the panel's own clusters on this machine and on each node stay
refused even then.

A name is resolved once: the caller checks every address it resolves to and then connects to
the returned address, so a name cannot change its answer between the check and the connection.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import psutil
from django.conf import settings

from panel.clusters.lib.hosts import IPAddress, forbidden_reason
from panel.clusters.models import Node
from panel.core.errors import N_, ServiceError

log = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Unresolved(Exception):
    """The host has no address."""

    def refusal(self, *, field: str, code: str) -> ServiceError:
        """What the tenant who named the host is told, on the form's ``field``."""
        return ServiceError(
            N_("The host “%(host)s” does not resolve to an address."),
            field=field,
            code=code,
            params={"host": self.args[0]},
        )


class Refused(Exception):
    """The panel may not connect to ``address``; ``reason`` goes to the panel's log only."""

    def __init__(self, address: IPAddress, reason: str) -> None:
        super().__init__(f"{address}: {reason}")
        self.address = address
        self.reason = reason


@dataclass(frozen=True)
class _NodeAddresses:
    addresses: frozenset[IPAddress]
    ports: tuple[int, int]


def networks(texts: Iterable[str]) -> list[Network]:
    """The operator's list of networks (CIDRs, or single addresses)."""
    return [ipaddress.ip_network(text.strip(), strict=False) for text in texts if text.strip()]


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (an address resolves to itself), in the resolver's order."""
    try:
        return [ipaddress.ip_address(host.split("%", 1)[0])]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in seen:
            seen.append(address)
    return seen


def machine_addresses() -> set[IPAddress]:
    """Every address of this machine's interfaces, loopback included."""
    found: set[IPAddress] = set()
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                try:
                    found.add(ipaddress.ip_address(entry.address.split("%", 1)[0]))
                except ValueError:
                    continue
    return found


def _plain(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _resolved(host: str) -> set[IPAddress]:
    try:
        return {_plain(address) for address in resolve(host, 0)}
    except (OSError, UnicodeError, ValueError):
        return set()


def _nodes() -> list[_NodeAddresses]:
    found = []
    for node in Node.objects.all():
        addresses: set[IPAddress] = set()
        for host in {node.address, node.private_address, node.agent_host} - {""}:
            addresses |= _resolved(host)
        found.append(_NodeAddresses(frozenset(addresses), (node.port_first, node.port_last)))
    return found


@dataclass(frozen=True)
class _Known:
    """This machine's addresses and the registered nodes', read once per check."""

    machine: frozenset[IPAddress]
    nodes: list[_NodeAddresses]

    @classmethod
    def now(cls) -> _Known:
        return cls(frozenset(_plain(a) for a in machine_addresses()), _nodes())


def refusal(
    address: IPAddress, port: int, *, allowed: Iterable[Network], known: _Known | None = None
) -> str | None:
    """Why the panel must not connect to ``address:port`` for a tenant, or None."""
    address = _plain(address)
    known = known or _Known.now()
    first, last = settings.PANEL_PORT_RANGE
    if (address in known.machine or address.is_loopback) and first <= port <= last:
        return "a port of the panel's own clusters on this machine"
    for node in known.nodes:
        if address in node.addresses and node.ports[0] <= port <= node.ports[1]:
            return "a port of the panel's own clusters on a node"
    if any(address in network for network in allowed):
        return None
    if address in known.machine:
        return "an address of this machine"
    if any(address in node.addresses for node in known.nodes):
        return "an address of one of the panel's nodes"
    return forbidden_reason(address, port, local_addresses=known.machine, panel_ports=(first, last))


def check(addresses: Iterable[IPAddress], port: int, *, allowed: Iterable[Network]) -> None:
    """Refused for the first of ``addresses`` the panel may not reach."""
    allowed = list(allowed)
    known = _Known.now()
    for address in addresses:
        reason = refusal(address, port, allowed=allowed, known=known)
        if reason:
            raise Refused(address, reason)


def checked_address(host: str, port: int, *, allowed: Iterable[Network]) -> str:
    """The address to connect to for ``host`` (canonical, see ``hosts.validate_host``), once
    every address it resolves to is allowed; Unresolved or Refused otherwise."""
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError, ValueError):
        addresses = []
    if not addresses:
        raise Unresolved(host)
    check(addresses, port, allowed=allowed)
    return str(addresses[0])
