"""libpq parameters for connections to servers outside the panel (pure, no Django)."""

from __future__ import annotations

# Files libpq would otherwise read from the home of whoever runs the panel (root's ~/.pgpass,
# ~/.postgresql/postgresql.crt, .key, root.crt, root.crl) when it connects to a server a user
# named: never (issue 29). Certificates of a verify-ca/verify-full server are checked against the
# system's authorities, not root's; GSSAPI would offer root's Kerberos tickets.
NO_FILE = "/nonexistent/pgpanel-no-client-file"
SYSTEM_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"


def outside_client_params(sslmode: str) -> dict[str, str]:
    """libpq parameters for a connection to a server outside the panel: no client file of this
    process's user is read, whatever its HOME holds."""
    verifying = sslmode in ("verify-ca", "verify-full")
    return {
        "passfile": NO_FILE,
        "sslcert": NO_FILE,
        "sslkey": NO_FILE,
        "sslrootcert": SYSTEM_CA_FILE if verifying else NO_FILE,
        "sslcrl": NO_FILE,
        "sslcrldir": NO_FILE,
        "gssencmode": "disable",
    }
