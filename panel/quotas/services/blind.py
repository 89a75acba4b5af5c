"""Failing closed when a measurement cannot see everything.

A database whose catalogue the monitor role could not read (a tenant set its connection limit to
0, closed it…) leaves what roles own there unknown. Reading that as "0 bytes" would lift a stop
and let writes through; so the quotas it concerns keep their last figures where the partial
reading is lower, and the cluster says why, as an event and a banner, until it can see again.
"""

from __future__ import annotations

from panel.clusters.face import transitions
from panel.clusters.models import Cluster, EventLevel
from panel.core.errors import N_, Message
from panel.quotas.lib import blindness
from panel.quotas.models import Quota, QuotaKind, Storage
from panel.quotas.services.measure import Usage


def is_blind_for(quota: Quota, usage: Usage) -> bool:
    """Whether ``quota``'s reading may be short: a role's, when any database was not read (it may
    own relations there); a database's (its relations), when that database was not read."""
    if not usage.blind:
        return False
    return quota.kind == QuotaKind.ROLE or quota.name in usage.blind


def fail_closed(quota: Quota, measured: tuple[int, int], usage: Usage) -> tuple[int, int]:
    """The (bytes, relations) to judge ``quota`` by: what was measured, or where the reading may
    be short, never less than the last figures."""
    space, files = measured
    if not is_blind_for(quota, usage):
        return space, files
    if quota.kind == QuotaKind.DATABASE:  # its size comes from the files or the superuser: seen
        return space, max(files, quota.files_used or 0)
    return max(space, quota.space_used or 0), max(files, quota.files_used or 0)


def describe(usage: Usage) -> str:
    """What could not be measured and why, as stored: databases and reason codes (empty:
    everything was measured). The driver's words went to the log, never to a page."""
    return blindness.dumps(usage.blind)


def record(cluster: Cluster, storage: Storage, usage: Usage) -> list[str]:
    """Keep why on the storage record (the banner reads it) and log an event when it changes."""
    return _record(cluster, storage, describe(usage))


def record_unmeasured(cluster: Cluster, exc: BaseException) -> list[str]:
    """A cycle that could measure nothing (every quota keeps its state): said like a blind one,
    the whole cluster with the reason's code (``exc``'s own words are in the log)."""
    storage = Storage.objects.get_or_create(cluster=cluster)[0]
    code = blindness.reason_code(getattr(exc, "sqlstate", None), str(exc))
    changes = _record(cluster, storage, blindness.dumps({"": code}))
    storage.save(update_fields=["blind"])
    return changes


def _record(cluster: Cluster, storage: Storage, now: str) -> list[str]:
    if now == storage.blind:
        return []
    storage.blind = now
    if now:
        transitions.log_event(
            cluster,
            "quota-blind",
            Message(
                N_(
                    "Storage could not be measured in %(what)s. The quotas keep their last state and "
                    "figures until it can be measured again."
                ),
                what=blindness.shown(now, cluster.name),
            ),
            EventLevel.WARNING,
        )
        return [f"blind: {now}"]
    transitions.log_event(
        cluster, "quota-seen", Message(N_("Storage can be measured in every database again."))
    )
    return ["blind: none"]
