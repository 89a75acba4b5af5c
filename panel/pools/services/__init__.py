"""One function per action on connection pools, and what the cluster services ask of them.

- ``actions``: create, change and delete a pool (checked, then applied under the cluster's lock);
- ``release``: give idle server connections back (a RECONNECT of one pool or all);
- ``figures``: what the pages show (budget, live ``SHOW POOLS``, the server slots pools hold);
- ``upkeep``: the hooks of the cluster services and the reconciler (guards, auth, stop, restart).

Every change goes through ``panel.pools.engine.apply.apply_config``, which reads top to bottom: render
``pgbouncer.ini`` and the auth file from the database (the pure renderer refuses what PgBouncer
would misparse) → write atomically, keeping ``.prev`` → start PgBouncer, RELOAD it, or restart it
for settings a RELOAD ignores → verify with ``SHOW DATABASES`` (RELOAD answers success even for a
broken file) → on a mismatch put the previous files back and report PgBouncer's own log line.
"""

from panel.pools.services.actions import create_pool, delete_pool, update_pool
from panel.pools.services.figures import (
    PoolsOverview,
    PoolStats,
    ServerRoom,
    SlotUsage,
    connected_clients,
    pool_budget,
    pool_connection_details,
    pool_stats,
    poolable,
    pooler_running,
    pools_overview,
    server_room,
    slot_usage,
)
from panel.pools.services.release import paused, release_all, release_idle_servers, release_pool
from panel.pools.services.upkeep import (
    ensure_not_used,
    pool_sizes,
    reapply_config,
    reconcile_all,
    reconcile_pgbouncer,
    stop_pgbouncer,
)

__all__ = [
    "PoolStats",
    "PoolsOverview",
    "ServerRoom",
    "SlotUsage",
    "connected_clients",
    "create_pool",
    "delete_pool",
    "ensure_not_used",
    "pool_budget",
    "pool_connection_details",
    "paused",
    "pool_sizes",
    "pool_stats",
    "poolable",
    "pooler_running",
    "pools_overview",
    "reconcile_all",
    "reconcile_pgbouncer",
    "reapply_config",
    "release_all",
    "release_idle_servers",
    "release_pool",
    "server_room",
    "slot_usage",
    "stop_pgbouncer",
    "update_pool",
]
