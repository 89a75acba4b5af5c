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
    target_session_attrs: str = ""


@dataclass(frozen=True)
class ConnectionDetails:
    """What a client needs to connect: one user, one database (or pool), over TLS."""

    user: str
    password: str
    host: str
    port: int
    database: str
    sslmode: str = "require"
    # A cluster with an entry on several nodes (issue 39): the other entries, after ``host`` and
    # ``port``, and what libpq should look for among them (``read-write``: the primary;
    # ``prefer-standby``: a standby). libpq tries the hosts in order; so do psycopg, pgx and the
    # PostgreSQL JDBC driver (``targetServerType``). Empty: one host, as before.
    more_hosts: tuple[tuple[str, int], ...] = ()
    target_session_attrs: str = ""

    @property
    def hosts(self) -> list[tuple[str, int]]:
        """Every entry, ``host`` first."""
        return [(self.host, self.port), *self.more_hosts]

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
            target_session_attrs=self.target_session_attrs,
        )

    def _uri(self, quoted_password: str) -> str:
        user = quote(self.user, safe="")
        database = quote(self.database, safe="")
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)
        # Without a password (the API without database:view_credentials) "user@host", as libpq
        # reads it, not "user:@host".
        credentials = f"{user}:{quoted_password}" if quoted_password else user
        attrs = f"&target_session_attrs={self.target_session_attrs}" if self.target_session_attrs else ""
        return f"postgresql://{credentials}@{hosts}/{database}?sslmode={self.sslmode}{attrs}"

    def _flags(self, quoted_password: str) -> str:
        # The SSL mode goes in libpq's PGSSLMODE: psql's --set=sslmode=… only sets a psql variable
        # and leaves the connection at libpq's default ("prefer"), which falls back to plain text.
        q = shlex.quote
        hosts = ",".join(h for h, _p in self.hosts)
        ports = ",".join(str(p) for _h, p in self.hosts)
        attrs = f"PGTARGETSESSIONATTRS={q(self.target_session_attrs)} " if self.target_session_attrs else ""
        return (
            f"PGPASSWORD={quoted_password} PGSSLMODE={q(self.sslmode)} {attrs}psql -U {q(self.user)} "
            f"-h {q(hosts)} -p {ports} -d {q(self.database)}"
        )

    def _params(self, password: str) -> list[tuple[str, str]]:
        found = [
            ("username", self.user),
            ("password", password),
            ("host", ",".join(h for h, _p in self.hosts)),
            ("port", ",".join(str(p) for _h, p in self.hosts)),
            ("database", self.database),
            ("sslmode", self.sslmode),
        ]
        if self.target_session_attrs:
            found.append(("target_session_attrs", self.target_session_attrs))
        return found
