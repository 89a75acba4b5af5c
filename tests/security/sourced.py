"""A PostgreSQL client from a chosen loopback address (127.0.0.2, 127.0.0.3, …): libpq cannot bind
its socket, so a forwarder in a thread accepts libpq's connection on 127.0.0.1 and opens its own
to the target from ``source`` (Linux lets any 127.x.y.z be bound), copying bytes both ways. What
the server (HAProxy, PostgreSQL, PgBouncer) sees is a client at ``source``; TLS goes end to end.
When the far side closes or resets, the near side is closed too, so the client sees it."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from panel.pools.models import ConnectionPool


class _Forwarder:
    def __init__(self, source: str, host: str, port: int) -> None:
        self.source, self.target = source, (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                near, _addr = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._pump, args=(near,), daemon=True).start()

    def _pump(self, near: socket.socket) -> None:
        far = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            far.bind((self.source, 0))
            far.connect(self.target)
        except OSError:
            far.close()
            near.close()
            return
        selector = selectors.DefaultSelector()
        selector.register(near, selectors.EVENT_READ, far)
        selector.register(far, selectors.EVENT_READ, near)
        try:
            while not self.stopped.is_set():
                for key, _events in selector.select(timeout=0.2):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            selector.close()
            near.close()
            far.close()

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()
        self.thread.join(timeout=5)


@contextlib.contextmanager
def forwarded(source: str, host: str, port: int) -> Iterator[int]:
    """The port on 127.0.0.1 that reaches ``host:port`` from ``source``."""
    forwarder = _Forwarder(source, host, port)
    try:
        yield forwarder.port
    finally:
        forwarder.close()


@contextlib.contextmanager
def connect_from(source: str, params: dict[str, Any]) -> Iterator[psycopg.Connection]:
    """A psycopg connection (libpq ``params``) whose server sees it coming from ``source``."""
    with (
        forwarded(source, str(params["host"]), int(params["port"])) as port,
        psycopg.connect(**{**params, "host": "127.0.0.1", "port": port}, autocommit=True) as conn,
    ):
        yield conn


def current_user_from(source: str, params: dict[str, Any]) -> str:
    """The user a connection from ``source`` is logged in as (it fails when the server refuses it)."""
    with connect_from(source, params) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]


def pool_params(pool: ConnectionPool) -> dict[str, Any]:
    """libpq's parameters of a connection pool, as its users connect (TLS, a 5 s timeout)."""
    from panel.pools import services as pool_services

    details = pool_services.pool_connection_details(pool)
    return {
        "host": details.host,
        "port": details.port,
        "dbname": details.database,
        "user": details.user,
        "password": details.password,
        "sslmode": "require",
        "connect_timeout": 5,
    }
