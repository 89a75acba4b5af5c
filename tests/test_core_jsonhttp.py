"""``panel.core.jsonhttp``: the one JSON request Patroni's REST API and etcd's gateway are asked
with, against a real HTTP server on loopback."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from panel.core import jsonhttp


class Echo(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        seen = {
            "method": self.command,
            "path": self.path,
            "type": self.headers.get("Content-Type"),
            "auth": self.headers.get("Authorization"),
            "body": json.loads(self.rfile.read(length)) if length else None,
        }
        data = json.dumps(seen).encode()
        self.send_response(418 if self.path == "/teapot" else 200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_a_body_goes_as_json_with_the_headers_given_and_the_answer_comes_back(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    auth = jsonhttp.basic_auth("panel", "s3cret:x")
    status, text = jsonhttp.exchange(conn, "PATCH", "/config", {"a": 1}, headers={"Authorization": auth})
    assert status == 200
    seen = json.loads(text)
    assert seen == {
        "method": "PATCH",
        "path": "/config",
        "type": "application/json",
        "auth": "Basic cGFuZWw6czNjcmV0Ong=",  # base64 of "panel:s3cret:x"
        "body": {"a": 1},
    }


def test_without_a_body_nothing_claims_json_and_an_error_status_is_returned_as_is(port: int) -> None:
    status, text = jsonhttp.exchange(
        http.client.HTTPConnection("127.0.0.1", port, timeout=5), "GET", "/teapot"
    )
    assert status == 418
    assert json.loads(text)["type"] is None and json.loads(text)["body"] is None


def test_nothing_listening_is_status_zero_with_the_reason() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    status, reason = jsonhttp.exchange(http.client.HTTPConnection("127.0.0.1", free, timeout=5), "GET", "/")
    assert status == 0 and "refused" in reason.lower()
