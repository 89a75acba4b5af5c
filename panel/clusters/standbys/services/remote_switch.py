"""A switchover's steps on a member on another node than its cluster's (``remote_members``): the
old primary's handover files (``handover``) where its Patroni runs its ``before_stop`` script, the
cascade's ``replicatefrom`` tag in its Patroni configuration (``cascade``), and the panel's session
on it over TCP. Each step on that node is one call to its agent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import psycopg
from django.conf import settings

from panel.clusters.engine import dbconn, isolation
from panel.clusters.models import Cluster, ClusterMember, credentials
from panel.clusters.standbys.engine import member_tls
from panel.clusters.standbys.services import ha_files, handover
from panel.clusters.standbys.services.remote_members import CONFIG_TIMEOUT, PID_TIMEOUT, ask
from panel.core.agent import on_node
from panel.core.errors import ServiceError

log = logging.getLogger(__name__)


def member_connection(member: ClusterMember) -> AbstractContextManager[psycopg.Connection]:
    """The panel's maintenance session on one member: through the socket on the cluster's node,
    over TCP at its node's address (TLS, the superuser's password) on another node."""
    cluster = member.cluster
    if not member.is_remote:
        return dbconn.admin_connection(cluster, port=member.port)
    return dbconn.connect(
        quiet_log=True,
        host=member.host,
        port=member.port,
        user=settings.PANEL_SUPERUSER,
        password=credentials.superuser_password(cluster),
        dbname=dbconn.MAINTENANCE_DATABASE,
        **member_tls.panel_client_params(cluster),  # the members' lines ask for it
    )


class RemoteHandover:
    """``handover.Handover`` for a primary on another node: the same files, in the cluster's socket
    directory there (where that member's ``before_stop`` script looks), through that node's agent."""

    def __init__(self, member: ClusterMember) -> None:
        self.member = member

    def wait_stopping(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ask(f"{__name__}.handover_here", self.member, "stopping", timeout=PID_TIMEOUT):
                return True
            if done():
                return False
        return False

    def release(self) -> None:
        ask(f"{__name__}.handover_here", self.member, "release", timeout=PID_TIMEOUT)


def handover_for(
    cluster: Cluster, primary: str
) -> AbstractContextManager[handover.Handover | RemoteHandover]:
    """A switchover's handover files where the old primary's Patroni runs its ``before_stop``."""
    member = cluster.members.select_related("node", "cluster").get(name=primary)
    return _remote_handover(member) if member.is_remote else handover.handover(cluster)


@contextmanager
def _remote_handover(member: ClusterMember) -> Iterator[RemoteHandover]:
    ask(f"{__name__}.handover_here", member, "begin", timeout=PID_TIMEOUT)
    try:
        yield RemoteHandover(member)
    finally:
        try:
            ask(f"{__name__}.handover_here", member, "end", timeout=PID_TIMEOUT)
        except ServiceError as exc:  # its script stops waiting after patroni_before_stop.WAIT anyway
            log.warning("member %s: handover files not removed: %s", member, exc.message)


def write_tags(cluster: Cluster, replicate_from: dict[str, str]) -> None:
    """A switchover's cascade (``cascade``) for the members on other nodes: each one's Patroni
    configuration written there with its ``replicatefrom`` tag (or without, ``{}``)."""
    for member in ha_files.members_of(cluster):
        if member.is_remote:
            ask(f"{__name__}.write_config_here", member, replicate_from, timeout=CONFIG_TIMEOUT)


# --- on the member's node --------------------------------------------------------------------------


@on_node(timeout=PID_TIMEOUT)
def handover_here(member: ClusterMember, step: str) -> bool:
    """One step of ``RemoteHandover`` on the old primary's node; ``stopping``: whether its
    ``before_stop`` script has said that the stop is next."""
    hand = handover.Handover(member.cluster)
    if step == "begin":
        hand.stopping.unlink(missing_ok=True)
        hand.pending.write_text("switchover\n")
    elif step == "release":
        hand.release()
    elif step == "end":
        hand.pending.unlink(missing_ok=True)
        hand.stopping.unlink(missing_ok=True)
    return hand.stopping.exists()


@on_node(timeout=CONFIG_TIMEOUT)
def write_config_here(member: ClusterMember, replicate_from: dict[str, str]) -> None:
    ha_files.write_member_config(
        member.cluster, member, isolation.os_user(member.cluster), replicate_from=replicate_from
    )
