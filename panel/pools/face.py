"""What the other apps may use of pools, besides its models and its pure lib: the one door, kept
by pyproject.toml's contract "other apps reach pools through its face". A name is here because an
app outside pools uses it; add one here rather than import past the face."""

from panel.pools import services
from panel.pools.engine import console, supervisor
from panel.pools.engine.console import admin_console
from panel.pools.engine.disk import bouncer_files
from panel.pools.engine.rendering import ADMIN_ROLE, MAX_CLIENT_CONN
from panel.pools.services import ServerRoom, pool_connection_details, pooler_running

__all__ = [
    "ADMIN_ROLE",
    "MAX_CLIENT_CONN",
    "ServerRoom",
    "admin_console",
    "bouncer_files",
    "console",
    "pool_connection_details",
    "pooler_running",
    "services",
    "supervisor",
]
