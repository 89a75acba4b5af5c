"""PgBouncer's hba file (``auth_type = hba``): the cluster's trusted sources at the pooler (pure).

PgBouncer 1.18 reads the file at start and at every RELOAD; a line it cannot parse is skipped
with a warning, so the lines are rendered only from networks ``lib.firewall`` has parsed.
Clients come over TCP with TLS and SCRAM from a trusted source; the panel reaches the admin
console over the Unix socket (0700, the cluster's user) with SCRAM. No line matches: rejected.
"""

from __future__ import annotations

from collections.abc import Sequence

from panel.clusters.lib import firewall

METHOD = "scram-sha-256"


def render(trusted_sources: Sequence[str]) -> str:
    lines = [
        "# Written by the control panel; edits here are overwritten.",
        f"local all all {METHOD}",
        *firewall.hba_lines(trusted_sources, connection_type="hostssl", method=METHOD),
    ]
    return "\n".join(lines) + "\n"
