"""Host names and addresses typed into the attach form: checked before anything resolves them.

No Django here. ``validate_host`` refuses what would reach the resolver as garbage (``.``,
``a..b``, labels over 63 characters, spaces: Python's IDNA codec raises UnicodeError on some of
those) and what would make libpq go somewhere else than one host (a Unix socket directory, a
comma-separated list). ``forbidden_reason`` says why an address must not be reached by an account
that is not staff.
"""

from __future__ import annotations

import encodings.idna
import ipaddress
import re
from collections.abc import Collection

from panel.core.errors import N_, CodedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_NAME_LENGTH = 253
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")


class InvalidHost(CodedError, ValueError):
    """The text is not a host name or an IP address; the message says what is wrong (a template
    and its parameters, rendered in the reader's language)."""

    def __init__(self, message: str, **params: object) -> None:
        super().__init__(message, field="host", code="attach.host_invalid", params=params)


def validate_host(text: str) -> str:
    """The host in canonical form: an IP address as ``ipaddress`` writes it, or a name in lowercase
    ASCII (IDNA-encoded, without a final dot). Raises InvalidHost."""
    host = text.strip()
    if not host:
        raise InvalidHost(N_("Enter a host name or an IP address."))
    if any(ch.isspace() for ch in host):
        raise InvalidHost(N_("A host name cannot contain spaces."))
    if host.startswith("/") or "," in host:
        raise InvalidHost(N_("Enter one host name or IP address (not a socket directory or a list)."))
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if ":" in bare:
        raise InvalidHost(N_("This is not a valid IPv6 address."))
    name = host[:-1] if host.endswith(".") else host
    if not name:
        raise InvalidHost(N_("Enter a host name or an IP address."))
    labels = name.split(".")
    ascii_labels = []
    for label in labels:
        if not label:
            raise InvalidHost(
                N_("A host name cannot contain an empty part (two dots in a row, or a leading dot).")
            )
        try:
            encoded = encodings.idna.ToASCII(label).decode("ascii").lower()
        except UnicodeError:
            raise InvalidHost(
                N_("“%(label)s” is not a valid part of a host name."), label=label[:70]
            ) from None
        if not _LABEL.fullmatch(encoded):
            raise InvalidHost(
                N_(
                    "“%(label)s” is not a valid part of a host name: letters, digits and hyphens, "
                    "at most 63 characters."
                ),
                label=label[:70],
            )
        ascii_labels.append(encoded)
    if _NUMERIC_LABEL.fullmatch(ascii_labels[-1]):
        # "127.1", "2130706433" or "0x7f.1" are addresses to inet_aton, not names.
        raise InvalidHost(N_("Write an IP address as four decimal numbers (e.g. 192.0.2.10)."))
    result = ".".join(ascii_labels)
    if len(result) > MAX_NAME_LENGTH:
        raise InvalidHost(N_("A host name has at most %(max)s characters."), max=MAX_NAME_LENGTH)
    return result


def forbidden_reason(
    address: IPAddress, port: int, *, local_addresses: Collection[IPAddress], panel_ports: tuple[int, int]
) -> str | None:
    """Why an account that is not staff may not make the panel connect to ``address:port``, or
    None. The reason goes to the panel's log, never to that account."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback address"
    if address.is_link_local:
        return "link-local address"
    if address.is_unspecified:
        return "unspecified address"
    if address.is_multicast or address.is_reserved:
        return "multicast or reserved address"
    first, last = panel_ports
    if address in local_addresses and first <= port <= last:
        return "a port of the panel's own clusters on this machine"
    return None
