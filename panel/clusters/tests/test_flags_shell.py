"""The flags line, pasted into a shell, insists on TLS (issue 11, item 8).

A server that says "no TLS here" (what a man in the middle says to strip it) must not get the
password: with psql's ``--set=sslmode=require`` libpq stayed at its default ``prefer``, fell back to
plain text and sent the password to whoever asked for it in clear.
"""

from __future__ import annotations

import shlex
import socket
import struct
import subprocess
import threading

from panel.clusters.lib.connstr import ConnectionDetails

SECRET = "not-for-plain-text"
SSL_QUERY = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def run_pasted(line: str, sql: str) -> subprocess.CompletedProcess[str]:
    """Run a flags line as a user pastes it into a terminal, adding ``-c sql``.

    A shell on purpose (the one place in the tests): the point is that the pasted line itself, with
    its quoting and its environment assignments, does what it says. No PG* variable of the test
    run leaks in; -X skips a ~/.psqlrc.
    """
    return subprocess.run(
        ["bash", "-c", f"{line} -X -At -c {shlex.quote(sql)}"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"},
    )


def _plain_text_server(listener: socket.socket, received: list[bytes]) -> None:
    """Refuse TLS, then ask for the password in clear and keep whatever the client sends."""
    listener.settimeout(10)
    try:
        conn, _addr = listener.accept()
    except OSError:
        return
    with conn:
        conn.settimeout(10)
        try:
            while True:
                head = conn.recv(8)
                if len(head) < 8:
                    return
                length, code = struct.unpack("!II", head)
                conn.recv(length - 8) if length > 8 else b""
                if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: "not here"
                    conn.sendall(b"N")
                    continue
                break  # a StartupMessage in plain text
            conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
            received.append(conn.recv(4096))
        except OSError:
            return


def test_the_pasted_flags_line_refuses_a_server_without_tls() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []
    server = threading.Thread(target=_plain_text_server, args=(listener, received), daemon=True)
    server.start()
    line = ConnectionDetails("doadmin", SECRET, "127.0.0.1", port, "defaultdb").flags()
    try:
        done = run_pasted(line, "SELECT 1")
    finally:
        listener.close()
        server.join(timeout=15)
    assert not any(SECRET.encode() in message for message in received), "the password went out in clear"
    assert done.returncode != 0
    assert "SSL" in done.stderr, done.stderr
