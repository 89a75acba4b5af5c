"""A cluster's floating address: one IPv4 address that vip-manager puts on the network interface of
whichever node holds the cluster's primary, so a client that connects to it follows a failover
without a multi-host string. Pure: the address and interface checked, and vip-manager's YAML
configuration for one member on one node.

vip-manager reads one key of the panel's etcd (the cluster's Patroni leader key, whose value is the
leading member's name) and brings the address up on its interface while that value is its own
member's name, down otherwise. The keys below are those of Debian's vip-manager 1.0.2
(``vip-manager --help``, its README): ``netmask`` is a prefix length, ``interval`` and
``retry-after`` are milliseconds.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from panel.clusters.lib import etcd as etcd_lib
from panel.clusters.lib.patroni import NAMESPACE

# How often vip-manager reads the leader key, and how it retries etcd or the interface: the
# address follows the leader within about a second of Patroni's change (Patroni itself takes
# its ttl to notice a lost primary).
INTERVAL_MS = 500
RETRY_AFTER_MS = 250
RETRY_NUM = 3
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
        raise ValueError(f"{text!r} is not an IPv4 address: vip-manager moves IPv4 addresses only")
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
    if name == "lo":  # vip-manager refuses it: no hardware address to announce the address with
        raise ValueError("the loopback interface cannot carry a floating address")
    return name


def host_of(address: str) -> str:
    """The stored ``198.18.0.200/28`` as a client's host (``198.18.0.200``); blank stays blank."""
    return address.split("/", 1)[0]


def parse_rendered(text: str) -> tuple[FloatingAddress, str]:
    """The address and interface of a configuration ``render`` wrote (to take the address off
    when its vip-manager stops); a ValueError when they are not there."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in ("ip", "netmask", "interface"):
            found[key] = json.loads(value) if value.startswith('"') else value
    try:
        address = parse_address(f"{found['ip']}/{found['netmask']}")
        return address, check_interface(found["interface"])
    except KeyError as exc:
        raise ValueError(f"not a floating address's configuration: no {exc.args[0]}") from None


def trigger_key(scope: str) -> str:
    """Patroni's leader key of a scope in the panel's etcd: it holds the leading member's name."""
    return etcd_lib.scope_prefix(NAMESPACE, scope) + "leader"


@dataclass(frozen=True)
class VipConfig:
    """One vip-manager: the cluster's address, the member it brings it up for, where it reads.
    ``tls``: the panel's etcd CA and this node's client certificate, logged in as the scope's
    user (``etcd_auth.scope_tls``: it may read its own scope only, as the cluster's Patroni)."""

    address: FloatingAddress
    interface: str
    scope: str
    member: str
    endpoints: Sequence[str]
    tls: etcd_lib.TlsPaths = field(repr=False)
    interval_ms: int = INTERVAL_MS
    retry_after_ms: int = RETRY_AFTER_MS
    retry_num: int = RETRY_NUM


def _scalar(value: str | int) -> str:
    # A JSON string is a YAML double-quoted scalar: nothing in it is read as YAML syntax.
    return str(value) if isinstance(value, int) else json.dumps(value)


def render(config: VipConfig) -> str:
    """vip-manager's YAML (``--config``): the leader key of the member's scope, the member's name
    as the value that means "here", every etcd member over TLS."""
    check_interface(config.interface)
    if not config.member:
        raise ValueError("vip-manager needs the member's name to compare with the leader key")
    if not config.endpoints:
        raise ValueError("vip-manager needs at least one etcd member")
    if any(not url.startswith("https://") for url in config.endpoints):
        raise ValueError("the panel's etcd is reached over TLS only (https:// endpoints)")
    if not (config.tls.ca and config.tls.cert and config.tls.key):
        raise ValueError("vip-manager needs the etcd CA, a client certificate and its key")
    items: list[tuple[str, str | int]] = [
        ("ip", config.address.ip),
        ("netmask", config.address.prefix),
        ("interface", config.interface),
        ("trigger-key", trigger_key(config.scope)),
        ("trigger-value", config.member),
        ("manager-type", "basic"),
        ("dcs-type", "etcd"),
    ]
    lines = ["# Written by the control panel (panel/clusters/services/vip.py): not to be edited."]
    lines += [f"{key}: {_scalar(value)}" for key, value in items]
    lines.append("dcs-endpoints:")
    lines += [f"  - {_scalar(url)}" for url in config.endpoints]
    tail: list[tuple[str, str | int]] = [
        ("etcd-ca-file", config.tls.ca),
        ("etcd-cert-file", config.tls.cert),
        ("etcd-key-file", config.tls.key),
    ]
    if config.tls.user:
        tail += [("etcd-user", config.tls.user), ("etcd-password", config.tls.password)]
    tail += [
        ("interval", config.interval_ms),
        ("retry-after", config.retry_after_ms),
        ("retry-num", config.retry_num),
    ]
    lines += [f"{key}: {_scalar(value)}" for key, value in tail]
    return "\n".join(lines) + "\n"
