"""What the apps built on clusters do when a cluster changes: registered by them, called here.

``clusters`` is the base app: pools and insights build on it, so it imports neither (an import
contract in pyproject.toml keeps it so). Where a cluster's own action must reach them — stopping a
cluster stops its PgBouncer, a role's new password rewrites PgBouncer's auth file, a database a
pool serves cannot be dropped, the overview reads the last collection — it calls what the app
registered in its ``AppConfig.ready()``. Nothing registered (an app not installed): nothing to do.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from panel.clusters.models import Cluster


class Pooler(Protocol):
    """The connection pools' side of a cluster (panel.pools.services)."""

    def stop_pgbouncer(self, cluster: Cluster) -> bool: ...

    def refresh_auth(self, cluster: Cluster) -> str | None: ...

    def ensure_not_used(
        self, cluster: Cluster, *, database: str | None = None, user: str | None = None
    ) -> None: ...

    def reconcile_all(self) -> list[str]: ...


class Metrics(Protocol):
    """What the collector last saw of a cluster (panel.insights.services)."""

    def latest(self, cluster: Cluster) -> Any: ...

    def server_started_at(self, cluster: Cluster) -> dt.datetime | None: ...


class _NoPooler:
    def stop_pgbouncer(self, cluster: Cluster) -> bool:
        return False

    def refresh_auth(self, cluster: Cluster) -> str | None:
        return None

    def ensure_not_used(
        self, cluster: Cluster, *, database: str | None = None, user: str | None = None
    ) -> None:
        return None

    def reconcile_all(self) -> list[str]:
        return []


class _NoLatest:
    stale = True
    values: dict[tuple[str, str], float] = {}

    def get(self, metric: str, labels: str = "") -> float | None:
        return None


class _NoMetrics:
    def latest(self, cluster: Cluster) -> Any:
        return _NoLatest()

    def server_started_at(self, cluster: Cluster) -> dt.datetime | None:
        return None


pooler: Pooler = _NoPooler()
metrics: Metrics = _NoMetrics()


def register_pooler(implementation: Pooler) -> None:
    global pooler
    pooler = implementation


def register_metrics(implementation: Metrics) -> None:
    global metrics
    metrics = implementation
