"""A cluster's floating address: one IPv4 address that the panel's follower
(``standbys/engine/vip_follow.py``) puts on the network interface of whichever node holds the cluster's
primary, so a client that connects to it follows a failover without a multi-host string. Pure: the
address and interface checked, and the follower's JSON configuration for one member on one node.

The follower reads one key of the panel's etcd (the cluster's Patroni leader key, whose value is
the leading member's name) and keeps the address on its interface while that value is its own
member's name, off otherwise, and off once etcd has not answered for ``retry`` rounds.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib.patroni import NAMESPACE

# How often the follower reads the leader key (the address follows Patroni's change within about
# that), how long one round may ask etcd's members, and after how many rounds without an answer
# it takes the address off: 3 x (0.5 + 1) = 4.5 s at most, well inside Patroni's ttl (20 s), the
# least time before another member can take the leader key of a member cut off.
INTERVAL_MS = 500
TIMEOUT_MS = 1000
RETRY = 3
# Linux's IFNAMSIZ less the terminating NUL; the characters every distribution's names use
# (eth0, ens3, enp0s31f6, bond0.100, br-lan).
_INTERFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")
# A smaller network has no address that is neither the network's nor its broadcast.
_MAX_PREFIX = 30


@dataclass(frozen=True)
class FloatingAddress:
    """An IPv4 host address and the prefix length of the network it is on (``198.18.0.200/28``)."""

    ip: str
    prefix: int

    def __str__(self) -> str:
        return f"{self.ip}/{self.prefix}"


def parse_address(text: str) -> FloatingAddress:
    """``text`` as an IPv4 host in a network, with its prefix length (``198.18.0.200/28``); a
    ValueError saying why not (no prefix, IPv6, the network's or broadcast address, loopback…)."""
    text = text.strip()
    if "/" not in text:
        raise ValueError(
            f"{text!r} has no prefix length: give the address with its network's, e.g. 198.18.0.200/24"
        )
    try:
        interface = ipaddress.ip_interface(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an IP address with a prefix length (e.g. 198.18.0.200/24)"
        ) from None
    if not isinstance(interface, ipaddress.IPv4Interface):
        raise ValueError(f"{text!r} is not an IPv4 address: a floating address is IPv4 only")
    ip, network = interface.ip, interface.network
    if network.prefixlen > _MAX_PREFIX:
        raise ValueError(
            f"{text!r}: a /{network.prefixlen} has no host address to float; use /{_MAX_PREFIX} or wider"
        )
    if ip.is_loopback or ip.is_multicast or ip.is_unspecified or ip.is_link_local or ip.is_reserved:
        raise ValueError(
            f"{text!r} cannot be a floating address (loopback, multicast, link-local or reserved)"
        )
    if ip in (network.network_address, network.broadcast_address):
        raise ValueError(f"{text!r} is the network's own or its broadcast address, not a host's")
    return FloatingAddress(str(ip), network.prefixlen)


def check_interface(name: str) -> str:
    """``name`` when it can be a Linux network interface's name; a ValueError otherwise."""
    if not _INTERFACE.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a network interface name (up to 15 letters, digits, '.', '-', '_')"
        )
    if name == "lo":  # no hardware address to announce the address with (gratuitous ARP)
        raise ValueError("the loopback interface cannot carry a floating address")
    return name


def host_of(address: str) -> str:
    """The stored ``198.18.0.200/28`` as a client's host (``198.18.0.200``); blank stays blank."""
    return address.split("/", 1)[0]


def parse_rendered(text: str) -> tuple[FloatingAddress, str]:
    """The address and interface of a configuration ``render`` wrote (to take the address off
    when its follower stops); a ValueError when they are not there."""
    try:
        data = json.loads(text)
        address = parse_address(f"{data['ip']}/{data['prefix']}")
        return address, check_interface(str(data["interface"]))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a floating address's configuration: no {exc}") from None


def trigger_key(scope: str) -> str:
    """Patroni's leader key of a scope in the panel's etcd: it holds the leading member's name."""
    return etcd_lib.scope_prefix(NAMESPACE, scope) + "leader"


@dataclass(frozen=True)
class VipConfig:
    """One follower: the cluster's address, the member it brings it up for, where it reads.
    ``tls``: the panel's etcd CA and this node's client certificate, logged in as the scope's
    user (``etcd_auth.scope_tls``: it may read its own scope only, as the cluster's Patroni)."""

    address: FloatingAddress
    interface: str
    scope: str
    member: str
    endpoints: Sequence[str]
    tls: etcd_lib.TlsPaths = field(repr=False)
    interval_ms: int = INTERVAL_MS
    timeout_ms: int = TIMEOUT_MS
    retry: int = RETRY


def fail_closed_seconds(config: VipConfig) -> float:
    """How long at most a follower keeps the address once no etcd member answers it: ``retry``
    rounds, each at most ``timeout_ms`` of asking and ``interval_ms`` of waiting."""
    return config.retry * (config.interval_ms + config.timeout_ms) / 1000


def render(config: VipConfig) -> str:
    """The follower's JSON (``standbys/engine/vip_follow.py --config``): the leader key of the member's
    scope, the member's name as the value that means "here", every etcd member over TLS."""
    check_interface(config.interface)
    if not config.member:
        raise ValueError("the follower needs the member's name to compare with the leader key")
    if not config.endpoints:
        raise ValueError("the follower needs at least one etcd member")
    if any(not url.startswith("https://") for url in config.endpoints):
        raise ValueError("the panel's etcd is reached over TLS only (https:// endpoints)")
    if not (config.tls.ca and config.tls.cert and config.tls.key):
        raise ValueError("the follower needs the etcd CA, a client certificate and its key")
    if min(config.interval_ms, config.timeout_ms, config.retry) <= 0:
        raise ValueError("the interval, the timeout and the rounds before failing closed must be positive")
    data = {
        "endpoints": list(config.endpoints),
        "ca": config.tls.ca,
        "cert": config.tls.cert,
        "key": config.tls.key,
        "user": config.tls.user,
        "password": config.tls.password,
        "trigger_key": trigger_key(config.scope),
        "trigger_value": config.member,
        "ip": config.address.ip,
        "prefix": config.address.prefix,
        "interface": config.interface,
        "interval_ms": config.interval_ms,
        "timeout_ms": config.timeout_ms,
        "retry": config.retry,
    }
    return json.dumps(data, indent=2) + "\n"
