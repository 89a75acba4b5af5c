"""What the apps built on clusters do when a cluster changes: registered by them, called here.

``clusters`` is the base app: pools and insights build on it, so it imports neither (an import
contract in pyproject.toml keeps it so). Where a cluster's own action must reach them — stopping a
cluster stops its PgBouncer, a role's new password rewrites PgBouncer's auth file, a database a
pool serves cannot be dropped, the overview reads the last collection — it calls what the app
registered in its ``AppConfig.ready()``. Nothing registered (an app not installed): nothing to do.

This is the one place where actions that span apps meet: deleting a cluster first runs every
``before_teardown`` step the apps registered (benchmarks cancel the cluster's runs, so no pgbench
outlives its server), then stops the pooler, then removes the server; the rows of every app go
with the cluster's row (foreign keys with ``on_delete=CASCADE``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from panel.clusters.models import Cluster


class Pooler(Protocol):
    """The connection pools' side of a cluster (panel.pools.services)."""

    def stop_pgbouncer(self, cluster: Cluster) -> bool: ...

    def reapply_config(self, cluster: Cluster) -> str | None: ...

    def ensure_not_used(
        self, cluster: Cluster, *, database: str | None = None, user: str | None = None
    ) -> None: ...

    def reconcile_all(self) -> list[str]: ...

    def pool_sizes(self, cluster: Cluster) -> dict[str, int]: ...

    def paused(self, cluster: Cluster) -> AbstractContextManager[bool]: ...


class Metrics(Protocol):
    """What the collector last saw of a cluster (panel.insights.services)."""

    def latest(self, cluster: Cluster) -> Any: ...

    def server_started_at(self, cluster: Cluster) -> dt.datetime | None: ...


class _NoPooler:
    def stop_pgbouncer(self, cluster: Cluster) -> bool:
        return False

    def reapply_config(self, cluster: Cluster) -> str | None:
        return None

    def ensure_not_used(
        self, cluster: Cluster, *, database: str | None = None, user: str | None = None
    ) -> None:
        return None

    def reconcile_all(self) -> list[str]:
        return []

    def pool_sizes(self, cluster: Cluster) -> dict[str, int]:
        return {}

    def paused(self, cluster: Cluster) -> AbstractContextManager[bool]:
        return nullcontext(False)


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


def _never_full(cluster: Cluster) -> bool:
    return False


# Whether a cluster is read-only because its disk is full (panel.quotas: the plan's disk or the
# node's volume past its high watermark); the status badge says "Disk full" then.
disk_full: Callable[[Cluster], bool] = _never_full


def _none_full(clusters: Iterable[Cluster]) -> set[Any]:
    return set()


# The same for a page of clusters in one query (the cluster list, the Nodes page): the primary
# keys of those that are full.
disk_full_among: Callable[[Iterable[Cluster]], set[Any]] = _none_full


log = logging.getLogger(__name__)


def _add(steps: list[Any], step: Any) -> None:
    """``step`` registered once, however often its app registers it."""
    if step not in steps:
        steps.append(step)


def _run_logged(steps: list[Any], what: str, cluster: Cluster, *args: Any) -> None:
    """Every step of a notification, in the order of registration; one that fails is logged
    (``what``, then the cluster's id) and the others still run."""
    for step in list(steps):
        try:
            step(cluster, *args)
        except Exception:
            log.exception("%s %s: %s failed", what, cluster.pk, getattr(step, "__name__", step))


_before_teardown: list[Callable[[Cluster], object]] = []


def register_before_teardown(step: Callable[[Cluster], object]) -> None:
    """``step(cluster)`` runs before a cluster's server is stopped for good (once per step)."""
    _add(_before_teardown, step)


def before_teardown(cluster: Cluster) -> None:
    """Every registered step, in the order of registration. A step that fails is logged and does
    not stop the deletion: what it was to stop goes down with the server anyway."""
    _run_logged(_before_teardown, "before deleting cluster", cluster)


def register_pooler(implementation: Pooler) -> None:
    global pooler
    pooler = implementation


def register_metrics(implementation: Metrics) -> None:
    global metrics
    metrics = implementation


def register_disk_full(
    implementation: Callable[[Cluster], bool], among: Callable[[Iterable[Cluster]], set[Any]]
) -> None:
    global disk_full, disk_full_among
    disk_full = implementation
    disk_full_among = among


# --- the server's configuration, a new cluster (panel.backups) --------------------------------

_server_config: list[Callable[[Cluster], list[str]]] = []
_after_provision: list[Callable[[Cluster], object]] = []


def register_server_config(step: Callable[[Cluster], list[str]]) -> None:
    """``step(cluster)`` runs whenever the server's configuration is written (creation, start,
    restart, resize), before the server reads it; it writes files of its own into PGDATA and
    returns their names, which panel.conf includes after the owner's settings (so they win)."""
    _add(_server_config, step)


def server_config(cluster: Cluster) -> list[str]:
    """Every registered step's files; a step that fails fails the write (and the start)."""
    names: list[str] = []
    for step in list(_server_config):
        names += step(cluster)
    return names


def register_after_provision(step: Callable[[Cluster], object]) -> None:
    """``step(cluster)`` runs once a new cluster is online (a backup of it, for instance)."""
    _add(_after_provision, step)


def after_provision(cluster: Cluster) -> None:
    """Every registered step; one that fails is logged and the cluster stays online."""
    _run_logged(_after_provision, "after creating cluster", cluster)


_delete_choices: list[Callable[[Cluster, Any], object]] = []


def register_delete_choice(step: Callable[[Cluster, Any], object]) -> None:
    """``step(cluster, form_data)`` records what the owner chose in the delete form for an app's
    part of the cluster (keep its backups?) before the deletion is queued."""
    _add(_delete_choices, step)


def delete_choices(cluster: Cluster, data: Any) -> None:
    for step in list(_delete_choices):
        step(cluster, data)


# --- what else a cluster keeps on its node's disk (panel.backups: the repository) ---------------

_disk_usage: list[Callable[[Cluster], int]] = []


def register_disk_usage(step: Callable[[Cluster], int]) -> None:
    """``step(cluster)`` answers the bytes of files the cluster has outside its data directory
    on its node's disk (a backup repository): they count against the plan's disk."""
    _add(_disk_usage, step)


def disk_usage(cluster: Cluster) -> int:
    """Every registered step's bytes (an app's files the quotas cycle adds to the data directory)."""
    return sum(step(cluster) for step in list(_disk_usage))


# --- a cluster with standbys changed its primary (panel.insights: the owner's email) ------------

_role_changed: list[Callable[[Cluster, Any], object]] = []


def register_role_changed(step: Callable[[Cluster, Any], object]) -> None:
    """``step(cluster, message)`` runs after a failover or switchover was recorded as an event."""
    _add(_role_changed, step)


def role_changed(cluster: Cluster, message: Any) -> None:
    """Every registered step; one that fails is logged (the event is recorded already)."""
    _run_logged(_role_changed, "role change of cluster", cluster, message)


# --- a read-only replica re-synchronised after its source's failover (panel.insights: email) ----

_replica_resynced: list[Callable[[Cluster, Any], object]] = []


def register_replica_resynced(step: Callable[[Cluster, Any], object]) -> None:
    """``step(replica, message)`` runs once a replica that could not follow its source is healed."""
    _add(_replica_resynced, step)


def replica_resynced(cluster: Cluster, message: Any) -> None:
    """Every registered step; one that fails is logged (the event is recorded already)."""
    _run_logged(_replica_resynced, "re-sync of replica", cluster, message)


# --- where a new standby is restored from (panel.backups: the repository) -----------------------


def _no_repository(cluster: Cluster) -> tuple[str, ...]:
    return ()


# ``replica_repository(cluster)``: pgBackRest's argv on the cluster's stanza up to the action
# (program, --config, --stanza), or () when the cluster has no repository; Patroni restores new
# standbys from it (standbys/lib/patroni.py ``create_replica_methods``).
replica_repository: Callable[[Cluster], tuple[str, ...]] = _no_repository


def register_replica_repository(implementation: Callable[[Cluster], tuple[str, ...]]) -> None:
    global replica_repository
    replica_repository = implementation
