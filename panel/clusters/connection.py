"""The connection details box, shared by the cluster and the pool pages
(templates/clusters/_connection_body.html)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.utils.translation import gettext_lazy

from panel.clusters.lib.connstr import FORMATS, ConnectionDetails

# The three views of the connection details box, in the managed service's order.
CONNECTION_VIEWS = (
    ("params", gettext_lazy("Connection parameters")),
    ("uri", gettext_lazy("Connection string")),
    ("flags", gettext_lazy("Flags")),
)
SECRET_FORMATS = ("password", *FORMATS)


def connection_box(
    details: ConnectionDetails, *, view: str, reveal: bool, selection: dict[str, str], urls: dict[str, str]
) -> dict[str, Any]:
    """Context for templates/clusters/_connection_body.html, shared by clusters and pools; the
    password is masked unless revealed."""
    return {
        "conn": details.shown(reveal=reveal),
        "query": urlencode({**selection, "view": view}),
        "secret_query": urlencode(selection),
        "conn_urls": urls,
    }
