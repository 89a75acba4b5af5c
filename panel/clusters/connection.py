"""The connection details box, shared by the cluster and the pool pages
(templates/clusters/_connection_body.html)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.translation import gettext_lazy

from panel.clusters.lib.connstr import FORMATS, ConnectionDetails
from panel.clusters.standbys.lib.vip import host_of
from panel.core.errors import ServiceError

# The three views of the connection details box, in the managed service's order.
CONNECTION_VIEWS = (
    ("params", gettext_lazy("Connection parameters")),
    ("uri", gettext_lazy("Connection string")),
    ("flags", gettext_lazy("Flags")),
)
SECRET_FORMATS = ("password", *FORMATS)


def connection_box(
    params: Any,
    details: Callable[[], ConnectionDetails],
    *,
    reveal: bool,
    selection: Sequence[str],
    url_names: str,
    url_args: Sequence[Any],
    extra: Mapping[str, str] | None = None,
    **context: Any,
) -> dict[str, Any]:
    """Context for templates/clusters/_connection_body.html, shared by clusters and pools.

    ``params`` are the request's query parameters (``view``, and the ``selection`` keys the user
    picked); ``details`` reads the connection details, a ServiceError becoming the box's error;
    ``url_names`` is the URL namespace of the box's ``connection``, ``connection-reveal`` and
    ``connection-secret`` views; ``extra`` are other query parameters the box keeps (the
    cluster's ``node``: primary or standby). The password is masked unless revealed.
    """
    view = params.get("view") if params.get("view") in dict(CONNECTION_VIEWS) else "params"
    box: dict[str, Any] = {
        **context,
        "view": view,
        "views": CONNECTION_VIEWS,
        "revealed": reveal,
        "conn": None,
        "conn_error": None,
        # An operator's floating address (standbys/services/vip.py): another host for the same ports.
        "floating_host": host_of(getattr(context.get("cluster"), "floating_address", "")),
    }
    try:
        shown = details()
    except ServiceError as exc:
        box["conn_error"] = exc.message
        return box
    picked = {**{key: getattr(shown, key) for key in selection}, **(extra or {})}
    box.update(
        conn=shown.shown(reveal=reveal),
        query=urlencode({**picked, "view": view}),
        secret_query=urlencode(picked),
        conn_urls={
            "connection": reverse(f"{url_names}:connection", args=url_args),
            "reveal": reverse(f"{url_names}:connection-reveal", args=url_args),
            "secret": reverse(f"{url_names}:connection-secret", args=url_args),
        },
    )
    return box
