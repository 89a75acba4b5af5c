"""Where a sink may send: a tenant names the host, so the panel checks the address before every
connection, as for attached servers and migration sources (``forbidden_reason``: loopback,
link-local, unspecified, multicast, reserved addresses, the panel's own cluster ports), unless
the address lies in PANEL_LOGSINK_TARGET_NETWORKS; the panel's own cluster ports on this machine
are refused even then. The connection then goes to the checked address."""

from __future__ import annotations

import ipaddress

from django.conf import settings

from panel.clusters.lib.hosts import InvalidHost, forbidden_reason, validate_host
from panel.clusters.services import attach
from panel.core.errors import N_, ServiceError


def checked_address(host: str, port: int, *, field: str = "config") -> str:
    """The address to connect to for ``host``; a ServiceError when it may not be reached."""
    try:
        host = validate_host(host)
    except InvalidHost as exc:
        raise ServiceError.of(exc, field) from None
    try:
        addresses = attach.resolve(host, port)
    except (OSError, UnicodeError):
        addresses = []
    if not addresses:
        raise ServiceError(
            N_("The host “%(host)s” does not resolve to an address."),
            field=field,
            code="logsink.host_unresolved",
            params={"host": host},
        )
    allowed = [ipaddress.ip_network(text, strict=False) for text in settings.PANEL_LOGSINK_TARGET_NETWORKS]
    local = attach._local_addresses()
    first, last = settings.PANEL_PORT_RANGE
    for address in addresses:
        own_port = (address in local or address.is_loopback) and first <= port <= last
        reason = (
            "own port"
            if own_port
            else None
            if any(address in network for network in allowed)
            else forbidden_reason(address, port, local_addresses=local, panel_ports=(first, last))
        )
        if reason:
            raise ServiceError(
                N_(
                    "The panel does not send logs to %(address)s: only public addresses and the networks "
                    "the operator allows (PANEL_LOGSINK_TARGET_NETWORKS) can receive them."
                ),
                field=field,
                code="logsink.host_forbidden",
                params={"address": str(address)},
            )
    return str(addresses[0])
