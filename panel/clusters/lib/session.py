"""The settings every session the panel opens to PostgreSQL sends in its startup packet.

A client's startup options outrank what ``ALTER DATABASE … SET`` and ``ALTER ROLE … SET`` give a
database or a role, and a tenant owns its databases: whatever they say, the panel's sessions see
the catalogue's names in UTF-8, search only ``pg_catalog`` (the CVE-2018-1058 pattern), load no
library, are not ended while idle, and neither wait on a tenant's lock nor run without end (a
tenant holding ``ACCESS EXCLUSIVE`` on its table must not hold the node's shared worker).
"""

from __future__ import annotations

# Waits on a lock this long at most, then fails (a tenant's lock is the tenant's business).
LOCK_TIMEOUT_MS = 5_000
# No statement of the panel's runs longer (its queries read catalogues and statistics).
STATEMENT_TIMEOUT_MS = 60_000
CLIENT_ENCODING = "UTF8"

_SETTINGS = (
    ("search_path", "pg_catalog,pg_temp"),
    ("local_preload_libraries", ""),
    ("statement_timeout", str(STATEMENT_TIMEOUT_MS)),
    ("lock_timeout", str(LOCK_TIMEOUT_MS)),
    ("idle_session_timeout", "0"),
    ("idle_in_transaction_session_timeout", "0"),
    ("default_transaction_isolation", "read\\ committed"),
    ("default_transaction_read_only", "off"),
    ("exit_on_error", "off"),
    ("DateStyle", "ISO"),
    ("standard_conforming_strings", "on"),
)
# libpq ``options``: "-c name=value" each, blanks in a value escaped with a backslash.
PINNED_OPTIONS = " ".join(f"-c {name}={value}" for name, value in _SETTINGS)
# The one a session that must see the server's configured settings keeps (it reads settings only).
SEARCH_PATH_OPTION = "-c search_path=pg_catalog,pg_temp"
