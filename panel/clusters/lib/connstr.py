"""Connection details in the three formats the managed service shows (pure, no Django)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from urllib.parse import quote

FORMATS = ("uri", "flags", "params")
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


@dataclass(frozen=True)
class ConnectionDetails:
    """What a client needs to connect: one user, one database (or pool), over TLS."""

    user: str
    password: str
    host: str
    port: int
    database: str
    sslmode: str = "require"

    def masked(self) -> ConnectionDetails:
        return ConnectionDetails(self.user, "*" * 16, self.host, self.port, self.database, self.sslmode)

    def uri(self) -> str:
        user = quote(self.user, safe="")
        password = quote(self.password, safe="")
        database = quote(self.database, safe="")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"postgresql://{user}:{password}@{host}:{self.port}/{database}?sslmode={self.sslmode}"

    def flags(self) -> str:
        q = shlex.quote
        return (
            f"PGPASSWORD={q(self.password)} psql -U {q(self.user)} -h {q(self.host)} "
            f"-p {self.port} -d {q(self.database)} --set=sslmode={self.sslmode}"
        )

    def params(self) -> list[tuple[str, str]]:
        return [
            ("username", self.user),
            ("password", self.password),
            ("host", self.host),
            ("port", str(self.port)),
            ("database", self.database),
            ("sslmode", self.sslmode),
        ]

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
