"""How records reach a sink: syslog over TCP (TLS when asked), octet-counted frames; HTTP(S)
``POST /_bulk`` for Elasticsearch and OpenSearch. Each connection goes to the address
``destination`` checked, with a timeout; TLS verifies the server against the sink's CA (or the
system's) and the host name the user gave."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from panel.core.errors import N_, Message


class SinkUnreachable(Exception):
    """The sink did not take the records; ``message`` says why (shown on the card, in the
    reader's language)."""

    def __init__(self, template: str, host: str, port: int, reason: object = "") -> None:
        self.message = Message(template, "logsink.unreachable", host=host, port=port, reason=str(reason))
        super().__init__(str(self.message))


def _context(config: Mapping[str, Any]) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=config.get("ca") or None)
    if config.get("cert") and config.get("key"):
        import tempfile

        with tempfile.NamedTemporaryFile("w") as cert, tempfile.NamedTemporaryFile("w") as key:
            cert.write(config["cert"])
            key.write(config["key"])
            cert.flush()
            key.flush()
            context.load_cert_chain(cert.name, key.name)
    return context


def _open(
    address: str, host: str, port: int, tls: bool, config: Mapping[str, Any], timeout: float
) -> socket.socket:
    try:
        sock = socket.create_connection((address, port), timeout=timeout)
    except OSError as exc:
        raise SinkUnreachable(
            N_("Cannot connect to %(host)s:%(port)s: %(reason)s"), host, port, exc.strerror or exc
        ) from None
    if not tls:
        return sock
    try:
        return _context(config).wrap_socket(sock, server_hostname=host)
    except (OSError, ssl.SSLError) as exc:
        sock.close()
        raise SinkUnreachable(N_("TLS with %(host)s:%(port)s failed: %(reason)s"), host, port, exc) from None


def send_syslog(address: str, config: Mapping[str, Any], frames: list[bytes], timeout: float) -> None:
    host, port, tls = str(config["server"]), int(config["port"]), bool(config.get("tls"))
    sock = _open(address, host, port, tls, config, timeout)
    try:
        sock.sendall(b"".join(frames))
    except OSError as exc:
        raise SinkUnreachable(
            N_("Sending to %(host)s:%(port)s failed: %(reason)s"), host, port, exc
        ) from None
    finally:
        sock.close()


def _request(
    address: str, config: Mapping[str, Any], method: str, suffix: str, body: bytes | None, timeout: float
) -> tuple[int, bytes]:
    """One HTTP(S) request to the sink's URL + ``suffix`` (its credentials as basic auth)."""
    parts = urlsplit(str(config["url"]))
    host = parts.hostname or ""
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    sock = _open(address, host, port, tls, config, timeout)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    conn.sock = sock
    headers = {"Content-Type": "application/x-ndjson"} if body is not None else {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    try:
        conn.request(method, parts.path.rstrip("/") + suffix, body=body, headers=headers)
        response = conn.getresponse()
        answer = response.read(1_000_000)
    except (OSError, http.client.HTTPException) as exc:
        raise SinkUnreachable(N_("%(host)s:%(port)s did not answer: %(reason)s"), host, port, exc) from None
    finally:
        conn.close()
    if response.status >= 300:
        raise SinkUnreachable(N_("%(host)s:%(port)s answered HTTP %(reason)s."), host, port, response.status)
    return response.status, answer


def send_bulk(address: str, config: Mapping[str, Any], body: bytes, timeout: float) -> None:
    parts = urlsplit(str(config["url"]))
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    _status, answer = _request(address, config, "POST", "/_bulk", body, timeout)
    try:
        errors = json.loads(answer).get("errors")
    except (ValueError, AttributeError):
        raise SinkUnreachable(
            N_("%(host)s:%(port)s did not answer as Elasticsearch does."), host, port
        ) from None
    if errors:
        raise SinkUnreachable(
            N_("%(host)s:%(port)s refused some records (errors in the _bulk answer)."), host, port
        )


def index_names(address: str, config: Mapping[str, Any], timeout: float) -> list[str]:
    """The sink's indices of its prefix (``_cat/indices``)."""
    suffix = f"/_cat/indices/{quote(str(config['index_prefix']))}-*?format=json&h=index"
    _status, answer = _request(address, config, "GET", suffix, None, timeout)
    try:
        return [str(row["index"]) for row in json.loads(answer)]
    except (ValueError, TypeError, KeyError):
        return []


def delete_index(address: str, config: Mapping[str, Any], name: str, timeout: float) -> None:
    _request(address, config, "DELETE", "/" + quote(name), None, timeout)
