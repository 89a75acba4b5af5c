"""A real rsyslog on loopback with a configuration of the tests' own, and a small HTTP server
that answers ``POST /_bulk`` as Elasticsearch does."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from panel.clusters.lib import tls as tls_lib

# One line per received message: host|app|severity|message (rsyslog's own parse of the frame).
RSYSLOG_CONF = """
module(load="imtcp")
global(workDirectory="{dir}")
template(name="fields" type="string" string="%HOSTNAME%|%APP-NAME%|%syslogseverity-text%|%msg%\\n")
ruleset(name="received") {{ action(type="omfile" file="{dir}/received.log" template="fields") }}
input(type="imtcp" address="{address}" port="{port}" ruleset="received")
"""
# A receiver that keeps control characters as they come (rsyslog escapes them unless told not
# to): what the panel sends is what the file shows.
RAW_CONF = """
global(parser.escapeControlCharactersOnReceive="off")
"""


@dataclass
class Rsyslog:
    port: int
    received: Path
    ca: str = ""

    def lines(self) -> list[str]:
        return self.received.read_text(errors="replace").splitlines() if self.received.exists() else []


def _free_port(address: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


# TLS (rsyslog-gnutls): the server's certificate signed by a CA of the test's own.
TLS_CONF = """
global(DefaultNetstreamDriver="gtls" DefaultNetstreamDriverCAFile="{dir}/ca.pem"
       DefaultNetstreamDriverCertFile="{dir}/cert.pem" DefaultNetstreamDriverKeyFile="{dir}/key.pem")
"""


def _rsyslog(tls: bool, address: str = "127.0.0.1", *, raw: bool = False) -> Iterator[Rsyslog]:
    binary = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"
    if not Path(binary).exists():
        pytest.fail("rsyslogd is not installed; run `make bootstrap-test`, which installs it")
    root = Path(tempfile.mkdtemp(prefix="pgpanel-rsyslog-"))
    port = _free_port(address)
    text = (RAW_CONF if raw else "") + RSYSLOG_CONF.format(dir=root, port=port, address=address)
    ca = ""
    if tls:
        certs = tls_lib.generate("rsyslog-test", ["127.0.0.1"])
        (root / "ca.pem").write_text(certs.ca_cert_pem)
        (root / "cert.pem").write_text(certs.server_cert_pem)
        (root / "key.pem").write_text(certs.server_key_pem)
        ca = certs.ca_cert_pem
        text = TLS_CONF.format(dir=root) + text.replace(
            'module(load="imtcp")',
            'module(load="imtcp" StreamDriver.Name="gtls" StreamDriver.Mode="1" StreamDriver.AuthMode="anon")',
        )
    conf = root / "rsyslog.conf"
    conf.write_text(text)
    proc = subprocess.Popen(
        [binary, "-n", "-f", str(conf), "-i", str(root / "rsyslogd.pid")],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "stderr.log", "wb"),  # noqa: SIM115  (closed with the process)
    )
    deadline = time.monotonic() + 20
    while True:
        with socket.socket() as sock:
            if sock.connect_ex((address, port)) == 0:
                break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"rsyslogd did not listen: {(root / 'stderr.log').read_text(errors='replace')}")
        time.sleep(0.05)
    yield Rsyslog(port=port, received=root / "received.log", ca=ca)
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def rsyslog() -> Iterator[Rsyslog]:
    yield from _rsyslog(tls=False)


@pytest.fixture(scope="module")
def rsyslog_tls() -> Iterator[Rsyslog]:
    yield from _rsyslog(tls=True)


@dataclass
class BulkServer:
    port: int
    bodies: list[tuple[str, str, bytes]] = field(default_factory=list)  # path, authorization, body
    requests: list[tuple[str, str]] = field(default_factory=list)  # method, path of the others
    # What GET _cat/indices answers: an old daily index, today's, and another prefix's.
    indices: list[str] = field(default_factory=list)

    def documents(self) -> list[dict]:
        docs = []
        for _path, _auth, body in self.bodies:
            lines = [json.loads(line) for line in body.decode().splitlines() if line]
            docs += [{**lines[i + 1], "_index": lines[i]["index"]["_index"]} for i in range(0, len(lines), 2)]
        return docs


@pytest.fixture(scope="module")
def bulk_server() -> Iterator[BulkServer]:
    found = BulkServer(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            found.bodies.append((self.path, self.headers.get("Authorization", ""), body))
            answer = json.dumps({"took": 1, "errors": False, "items": []}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def _json(self, value: object) -> None:
            answer = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def do_GET(self) -> None:  # noqa: N802
            found.requests.append(("GET", self.path))
            self._json([{"index": name} for name in found.indices])

        def do_DELETE(self) -> None:  # noqa: N802
            found.requests.append(("DELETE", self.path))
            self._json({"acknowledged": True})

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    found.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield found
    server.shutdown()
    server.server_close()
