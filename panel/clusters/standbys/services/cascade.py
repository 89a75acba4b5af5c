"""The third member's part in a switchover: it streams from the candidate beforehand, so that it
is a standby of the new primary the moment the candidate is promoted.

Without this, the third member streams from the old primary until its Patroni follows the new
leader, and Patroni sleeps 2 s first when a named candidate takes the leader key ("give a time to
somebody to take the leader lock", ``patroni/ha.py``). Meanwhile, with strict synchronous mode
(three members), every commit on the new primary waits for a standby: 1.5–2.3 s measured. A
cascading standby follows its upstream's promotion by itself (``recovery_target_timeline``
``latest``), so the commits wait for nobody's loop. Patroni's ``replicatefrom`` tag sets the
upstream; the tag is removed again afterwards (the upstream is the leader then: nothing moves).
"""

from __future__ import annotations

import logging
import time

from panel.clusters.engine import dbconn, isolation
from panel.clusters.models import Cluster, ClusterMember, credentials
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.services import ha, remote_switch

log = logging.getLogger(__name__)

# Patroni creates the candidate's slot for the follower on its next loop, then the follower's
# WAL receiver retries every wal_retrieve_retry_interval: two or three seconds here.
CASCADE_TIMEOUT = 10.0


def follow_candidate(cluster: Cluster, primary: str, candidate: str, others: list[str]) -> bool:
    """Every member in ``others`` streams from ``candidate``; False when one did not within
    ``CASCADE_TIMEOUT`` (the switchover then goes on the slower way). The primary's Patroni reads
    its configuration again too, so that it runs the switchover's ``before_stop`` script
    (``handover``): Patroni reloads at the start of its next loop, before it looks at the
    switchover asked after this."""
    _apply(cluster, [primary, *others], dict.fromkeys(others, candidate))
    if not others:
        return True
    upstream = cluster.members.select_related("node", "cluster").get(name=candidate)
    deadline = time.monotonic() + CASCADE_TIMEOUT
    while time.monotonic() < deadline:
        if set(others) <= _streaming_from(upstream):
            return True
        time.sleep(0.1)
    log.warning("%s of %s did not stream from %s in time", ", ".join(others), cluster.pk, candidate)
    return False


def follow_leader(cluster: Cluster, others: list[str]) -> None:
    """The members in ``others`` follow whoever is the leader again (no tag)."""
    if others:
        _apply(cluster, others, {})


def _apply(cluster: Cluster, names: list[str], replicate_from: dict[str, str]) -> None:
    ha.write_configs(cluster, isolation.os_user(cluster), replicate_from=replicate_from)
    remote_switch.write_tags(cluster, replicate_from)  # write_configs writes this node's only
    for member in cluster.members.filter(name__in=names):
        status, text = patroni.rest(
            "POST",
            member.rest_port,
            "/reload",
            {},
            timeout=5,
            host=member.host,
            auth=credentials.rest_credentials(cluster),
        )
        if status not in (200, 202):
            log.warning("reloading %s's Patroni: %s %s", member.name, status, text.strip())


def _streaming_from(upstream: ClusterMember) -> set[str]:
    """The members whose WAL receiver streams from ``upstream`` (on any node)."""
    try:
        with remote_switch.member_connection(upstream) as conn:
            rows = conn.execute(
                "SELECT application_name FROM pg_catalog.pg_stat_replication WHERE state = 'streaming'"
            ).fetchall()
    except dbconn.DatabaseError:
        return set()
    return {row[0] for row in rows}
