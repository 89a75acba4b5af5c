"""One JSON request over a connection the caller opened (plain HTTP or HTTPS with its own TLS
context): Patroni's REST API and etcd's JSON gateway are both asked this way."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Mapping
from typing import Any


def basic_auth(username: str, password: str) -> str:
    """An ``Authorization`` header's value for HTTP basic authentication."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def exchange(
    conn: http.client.HTTPConnection,
    method: str,
    path: str,
    body: Any = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """Send ``body`` (JSON; None: no body) and read the answer: (status, text), or (0, reason)
    when nothing answers or the connection fails (TLS included). The connection is closed."""
    sent = dict(headers or {})
    payload = None
    if body is not None:
        payload = json.dumps(body)
        sent["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=payload, headers=sent)
        response = conn.getresponse()
        return response.status, response.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        return 0, str(exc)
    finally:
        conn.close()
