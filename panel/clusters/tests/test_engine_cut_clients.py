"""Ending the connections of addresses no longer trusted (``haproxy.cut_clients``, run after
HAProxy's sources change): real sockets on loopback, IPv4 and IPv6; the kernel closes only the
refused client's connection, on the given ports only."""

from __future__ import annotations

import socket

import pytest

from panel.clusters.standbys.engine import haproxy


def _pair(family: socket.AddressFamily, server: str, client: str) -> tuple[socket.socket, socket.socket, int]:
    listener = socket.socket(family)
    listener.bind((server, 0))
    listener.listen()
    port = listener.getsockname()[1]
    near = socket.socket(family)
    near.bind((client, 0))
    near.connect((server, port))
    far, _addr = listener.accept()
    listener.close()
    near.settimeout(2)
    return near, far, port


def _open(near: socket.socket, far: socket.socket) -> bool:
    try:
        far.sendall(b"x")
        return near.recv(1) == b"x"
    except OSError:  # the server side was destroyed (aborted) or the client reset
        return False


@pytest.mark.parametrize(
    ("family", "server", "refused", "allowed"),
    [(socket.AF_INET, "127.0.0.1", "127.0.0.3", "127.0.0.2"), (socket.AF_INET6, "::1", "::1", None)],
)
def test_only_the_refused_clients_connection_is_closed(
    family: socket.AddressFamily, server: str, refused: str, allowed: str | None
) -> None:
    bad_near, bad_far, port = _pair(family, server, refused)
    other_near, other_far, other_port = _pair(family, server, refused)  # not one of the ports
    pairs = [(other_near, other_far)]
    if allowed:
        good_near, good_far, _port = _pair(family, server, allowed)
        pairs.append((good_near, good_far))
    try:
        # The allowed client is on a watched port too: spared for its address.
        ports = [port] + ([good_far.getsockname()[1]] if allowed else [])
        assert haproxy.cut_clients(ports, lambda address: address != refused) == 1
        assert not _open(bad_near, bad_far)
        assert _open(other_near, other_far)
        if allowed:
            assert _open(good_near, good_far)
    finally:
        for sock in (bad_near, bad_far, *(s for pair in pairs for s in pair)):
            sock.close()
