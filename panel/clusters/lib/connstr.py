"""Connection details in the three formats the managed service shows (pure, no Django)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import quote

FORMATS = ("uri", "flags", "params")
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
PASSWORD_MASK = "********"


@dataclass(frozen=True)
class ShownDetails:
    """Connection details as a page or a terminal shows them: the password is the mask unless
    revealed, and the formatted strings carry it literally."""

    user: str
    password: str
    host: str
    port: int
    database: str
    sslmode: str
    uri: str
    flags: str
    params: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ConnectionDetails:
    """What a client needs to connect: one user, one database (or pool), over TLS."""

    user: str
    password: str
    host: str
    port: int
    database: str
    sslmode: str = "require"

    def uri(self) -> str:
        return self._uri(quote(self.password, safe=""))

    def flags(self) -> str:
        return self._flags(shlex.quote(self.password))

    def params(self) -> list[tuple[str, str]]:
        return self._params(self.password)

    def params_text(self) -> str:
        return "\n".join(f"{key} = {value}" for key, value in self.params())

    def render(self, fmt: str) -> str:
        if fmt == "uri":
            return self.uri()
        if fmt == "flags":
            return self.flags()
        if fmt == "params":
            return self.params_text()
        raise ValueError(f"Unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")

    def shown(self, *, reveal: bool) -> ShownDetails:
        """The details to display, with the password replaced by the mask unless ``reveal``.

        The mask goes in after quoting, so the URI reads ``user:********@host`` rather than
        ``user:%2A%2A…@host`` and the flags line carries no shell quotes around it.
        """
        password = self.password if reveal else PASSWORD_MASK
        return ShownDetails(
            user=self.user,
            password=password,
            host=self.host,
            port=self.port,
            database=self.database,
            sslmode=self.sslmode,
            uri=self.uri() if reveal else self._uri(PASSWORD_MASK),
            flags=self.flags() if reveal else self._flags(PASSWORD_MASK),
            params=tuple(self._params(password)),
        )

    def _uri(self, quoted_password: str) -> str:
        user = quote(self.user, safe="")
        database = quote(self.database, safe="")
        host = f"[{self.host}]" if ":" in self.host else self.host
        # Without a password (the API without database:view_credentials) "user@host", as libpq
        # reads it, not "user:@host".
        credentials = f"{user}:{quoted_password}" if quoted_password else user
        return f"postgresql://{credentials}@{host}:{self.port}/{database}?sslmode={self.sslmode}"

    def _flags(self, quoted_password: str) -> str:
        # The SSL mode goes in libpq's PGSSLMODE: psql's --set=sslmode=… only sets a psql variable
        # and leaves the connection at libpq's default ("prefer"), which falls back to plain text.
        q = shlex.quote
        return (
            f"PGPASSWORD={quoted_password} PGSSLMODE={q(self.sslmode)} psql -U {q(self.user)} "
            f"-h {q(self.host)} -p {self.port} -d {q(self.database)}"
        )

    def _params(self, password: str) -> list[tuple[str, str]]:
        return [
            ("username", self.user),
            ("password", password),
            ("host", self.host),
            ("port", str(self.port)),
            ("database", self.database),
            ("sslmode", self.sslmode),
        ]
