"""Where a sink may send: a tenant names the host, so the panel checks every address it resolves
to before every connection (``panel.clusters.services.destinations``: not loopback, link-local,
multicast or reserved, not an address of this machine or of a registered node, on any port),
unless the address lies in PANEL_LOGSINK_TARGET_NETWORKS; the panel's own cluster ports stay
refused even then. The connection then goes to the checked address."""

from __future__ import annotations

import logging

from django.conf import settings

from panel.clusters.face import destinations
from panel.clusters.lib.hosts import InvalidHost, validate_host
from panel.core.errors import N_, ServiceError

log = logging.getLogger(__name__)


def checked_address(host: str, port: int, *, field: str = "config") -> str:
    """The address to connect to for ``host``; a ServiceError when it may not be reached."""
    try:
        host = validate_host(host)
    except InvalidHost as exc:
        raise ServiceError.of(exc, field) from None
    try:
        return destinations.checked_address(
            host, port, allowed=destinations.networks(settings.PANEL_LOGSINK_TARGET_NETWORKS)
        )
    except destinations.Unresolved as exc:
        raise exc.refusal(field=field, code="logsink.host_unresolved") from None
    except destinations.Refused as exc:
        log.info(
            "logsink destination %s:%s refused (not public, not in PANEL_LOGSINK_TARGET_NETWORKS): %s",
            host,
            port,
            exc,
        )
        raise ServiceError(
            N_(
                "The panel does not send logs to %(address)s, a private address: use the receiver's "
                "public address, or ask the panel's operator to allow that network."
            ),
            field=field,
            code="logsink.host_forbidden",
            params={"address": str(exc.address)},
        ) from None
