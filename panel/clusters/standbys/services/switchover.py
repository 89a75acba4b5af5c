"""A switchover of a cluster with standbys: the user's move of the primary to a chosen standby
(or the synchronous one), with the pools paused only while no member takes writes. The steps: the
third member cascades from the candidate (``cascade``), a CHECKPOINT, Patroni's ``POST
/switchover`` in a thread of its own, the old primary's stop held by its ``before_stop`` script
until the pools are paused (``handover``, ``remote_switch``), the pools resumed once the candidate
takes writes and PgBouncer names it."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable

from panel.clusters import hooks
from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, EventLevel, MemberRole, credentials
from panel.clusters.services import transitions
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import patroni as patroni_lib
from panel.clusters.standbys.lib.patroni import MemberStatus
from panel.clusters.standbys.services import cascade, ha, remote_switch
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError, Term

log = logging.getLogger(__name__)

# A standby further behind than this would make the switchover wait (or lose what it lacks).
MAX_SWITCHOVER_LAG_BYTES = 1024 * 1024
SWITCHOVER_TIMEOUT = 60.0


def _refuse_single(cluster: Cluster) -> None:
    if not cluster.is_ha:
        raise ServiceError(
            N_("This cluster has no standby node to switch over to; add standbys first."),
            field="to",
            code="cluster.switchover_no_standby",
            params={},
        )


def pick_candidate(cluster: Cluster, statuses: list[MemberStatus], to: str | None) -> MemberStatus:
    """The standby to promote: ``to``, or the synchronous one; refused when it is missing, the
    primary already, not streaming, not synchronous or lagging."""
    names = [m.name for m in cluster.members.order_by("name")]
    if to and to not in names:
        raise ServiceError(
            N_("The cluster has no member “%(member)s”; its members are %(names)s."),
            field="to",
            code="cluster.switchover_unknown_member",
            params={"member": to, "names": ", ".join(names)},
        )
    by_name = {s.name: s for s in statuses}
    if to and by_name.get(to) is not None and by_name[to].is_primary:
        raise ServiceError(
            N_("“%(member)s” is the primary already."),
            field="to",
            code="cluster.switchover_already_primary",
            params={"member": to},
        )
    rows = {m.name: m for m in cluster.members.select_related("node")}
    standbys = [
        dataclasses.replace(s, lag_bytes=ha.replay_lag(cluster, rows[s.name]))
        for s in statuses
        if not s.is_primary and (to is None or s.name == to) and s.name in rows
    ]
    fit = [
        s
        for s in standbys
        # Synchronous mode: only the synchronous standby is sure to have every commit (Patroni
        # refuses the others too).
        if s.sync and _caught_up(s)
    ]
    by_name.update({s.name: s for s in standbys})
    if not fit:
        target = by_name.get(to) if to else None
        if target is not None and _caught_up(target) and not target.sync:
            # Caught up but not the standby Patroni names synchronous (a second standby stays
            # asynchronous; a lone one is named a loop after it streams): saying it lags is untrue.
            sync = next((s.name for s in statuses if s.sync), None)
            if sync is None:
                raise ServiceError(
                    N_(
                        "“%(member)s” cannot take over yet: Patroni has not named it the synchronous "
                        "standby again since it streams; try again in a few seconds."
                    ),
                    field="to",
                    code="cluster.switchover_member_not_sync",
                    params={"member": to},
                )
            raise ServiceError(
                N_(
                    "“%(member)s” cannot take over: only the synchronous standby is sure to have "
                    "every commit, and at the moment that is %(sync)s."
                ),
                field="to",
                code="cluster.switchover_member_not_sync",
                params={"member": to, "sync": sync},
            )
        raise ServiceError(
            N_(
                "“%(member)s” cannot take over now: it is %(state)s and %(lag)s bytes behind the primary "
                "(at most %(max)s). Wait until it has caught up."
            ),
            field="to",
            code="cluster.switchover_member_lagging",
            params={
                "member": to or "any standby",
                "state": target.state if target else "not streaming",
                "lag": target.lag_bytes if target and target.lag_bytes is not None else "?",
                "max": MAX_SWITCHOVER_LAG_BYTES,
            },
        )
    return min(fit, key=lambda s: (s.lag_bytes or 0, s.name))


# The refusals that time can end: a standby catching up, or one Patroni has not named synchronous
# yet (a pair's standby, a loop after it streams again).
NOT_YET = frozenset({"cluster.switchover_member_lagging", "cluster.switchover_member_not_sync"})


def _caught_up(status: MemberStatus) -> bool:
    return (
        status.state == "streaming"
        and status.lag_bytes is not None
        and status.lag_bytes <= MAX_SWITCHOVER_LAG_BYTES
    )


@on_node(timeout=SWITCHOVER_TIMEOUT + 15)
def switchover(cluster: Cluster, to: str | None = None) -> str:
    """Make ``to`` (or the best standby) the primary, cleanly: Patroni stops writes on the old
    primary, waits for the candidate to replay everything, promotes it, the old primary follows
    the new one. The pools are paused meanwhile (their clients wait, nobody reaches the old
    primary) and resume on the new primary. Returns the new primary's name."""
    _refuse_single(cluster)
    transitions.require_serving(cluster, fresh=True, field="to")
    return switch(cluster, to)


def switch(cluster: Cluster, to: str | None = None, phases: dict[str, float] | None = None) -> str:
    """``switchover`` without asking whether the cluster serves (a rolling restart's step).
    ``phases`` receives the monotonic time of each step (``failover.py --breakdown``)."""
    phases = {} if phases is None else phases

    def mark(name: str) -> None:
        phases[name] = time.monotonic()

    statuses = ha.read_statuses(cluster)
    primary = next((s for s in statuses if s.is_primary and s.state == "running"), None)
    if primary is None:
        raise ServiceError(
            N_("The cluster has no running primary at the moment; try again in a few seconds."),
            field="to",
            code="cluster.switchover_no_primary",
            params={},
        )
    candidate = pick_candidate(cluster, statuses, to)
    ha.record_statuses(cluster, statuses)  # the switchover's duration counts from here
    others = [s.name for s in statuses if s.name not in (primary.name, candidate.name)]
    mark("started")
    ha.SWITCHING.add(cluster.pk)
    try:
        _switch(cluster, primary.name, candidate.name, others, mark)
    finally:
        ha.SWITCHING.discard(cluster.pk)
        log.info(
            "switchover of %s to %s: %s",
            cluster.pk,
            candidate.name,
            ", ".join(f"{name} {at - phases.get('paused', at):+.2f} s" for name, at in phases.items()),
        )
    ha.refresh_members(cluster, cause="switchover")
    return cluster.members.get(role=MemberRole.PRIMARY).name


def _switch(
    cluster: Cluster, primary: str, candidate: str, others: list[str], mark: Callable[[str], None]
) -> None:
    """The cascade, CHECKPOINT, and Patroni's switchover, the pools paused from the moment
    Patroni stops the old primary until PgBouncer names the new one."""
    cascade.follow_candidate(cluster, primary, candidate, others)
    mark("cascaded")
    checkpoint(cluster)
    mark("checkpointed")
    asked = Switchover(cluster, primary, candidate)
    try:
        with remote_switch.handover_for(cluster, primary) as hand:
            asked.start()
            mark("asked")
            # The pools' clients go on until Patroni is about to stop the old primary.
            if hand.wait_stopping(lambda: asked.answer is not None, SWITCHOVER_TIMEOUT):
                mark("stopping")
            elif asked.refused():
                asked.finish()  # raises: Patroni changed nothing, the pools were never paused
            else:
                log.warning("switchover of %s: Patroni did not run the before_stop script", cluster.pk)
            with hooks.pooler.paused(cluster):
                mark("paused")
                hand.release()
                paused_at = time.monotonic()
                repointed = False
                if asked.wait_writable():
                    mark("writable")
                    # PgBouncer repointed (its files name the new primary) before the pools resume.
                    repointed = asked.wait_repointed()
                    mark("repointed")
        mark("resumed")
        if repointed:  # else the last refresh_members sees the change, whenever it comes
            asked.announce(time.monotonic() - paused_at)
        asked.finish()
    finally:
        cascade.follow_leader(cluster, others)


def checkpoint(cluster: Cluster) -> None:
    """A CHECKPOINT before the switchover, so that the one the old primary's shutdown takes while
    the pools wait has little left to write."""
    try:
        with dbconn.admin_connection(cluster) as conn:
            conn.execute("CHECKPOINT")
    except dbconn.DatabaseError:
        return


class Switchover:
    """Patroni's switchover from ``leader`` to ``candidate``, asked in a thread of its own: its
    answer comes up to a second after the promotion (Patroni looks once a second), so the
    candidate itself is watched to resume the pools as soon as it accepts writes."""

    def __init__(self, cluster: Cluster, leader: str, candidate: str) -> None:
        self.cluster, self.leader, self.candidate = cluster, leader, candidate
        # Read here: the thread has a database connection of its own (not the caller's transaction).
        leader_member = cluster.members.get(name=leader)
        self.rest_port, self.rest_host = leader_member.rest_port, leader_member.host
        self.auth = credentials.rest_credentials(cluster)
        self.answer: tuple[int, str] | None = None
        self.thread = threading.Thread(target=self._ask, daemon=True)
        self.deadline = time.monotonic() + SWITCHOVER_TIMEOUT

    def _ask(self) -> None:
        body = {"leader": self.leader, "candidate": self.candidate}
        self.answer = patroni.rest(
            "POST",
            self.rest_port,
            "/switchover",
            body,
            timeout=SWITCHOVER_TIMEOUT,
            host=self.rest_host,
            auth=self.auth,
        )

    def start(self) -> None:
        self.thread.start()

    def refused(self) -> bool:
        return self.answer is not None and self.answer[0] != 200

    def wait_writable(self) -> bool:
        """Until the candidate's PostgreSQL is out of recovery (True), or Patroni refused. One
        session asks every 20 ms (a hot standby's session sees its own promotion): a new
        connection per look cost more than the look on this loaded machine."""
        candidate = self.cluster.members.select_related("node", "cluster").get(name=self.candidate)
        while time.monotonic() < self.deadline and not self.refused():
            try:
                with remote_switch.member_connection(candidate) as conn:
                    while time.monotonic() < self.deadline and not self.refused():
                        row = conn.execute("SELECT pg_catalog.pg_is_in_recovery()").fetchone()
                        if row == (False,):
                            return True
                        time.sleep(0.02)
            except dbconn.DatabaseError:
                time.sleep(0.05)
        return False

    def wait_repointed(self) -> bool:
        """Until Patroni names the candidate the running primary; then the rows say so and
        PgBouncer's files are rendered for it (reloaded and checked). The event and the owner's
        email wait until the pools resume (``announce``)."""
        # The candidate's own Patroni first: the old primary's is busy demoting.
        candidate = self.cluster.members.get(name=self.candidate)
        rest_port, rest_host = candidate.rest_port, candidate.host
        while time.monotonic() < self.deadline:
            status, text = patroni.rest("GET", rest_port, "/cluster", timeout=1.5, host=rest_host)
            try:
                statuses = patroni_lib.parse_cluster(text) if status == 200 else []
            except ValueError:
                statuses = []
            statuses = statuses or ha.read_statuses(self.cluster)
            if any(s.name == self.candidate and s.is_primary and s.state == "running" for s in statuses):
                ha.record_statuses(self.cluster, statuses)
                hooks.pooler.reapply_config(self.cluster)
                return True
            time.sleep(0.05)
        return False

    def announce(self, paused_for: float) -> None:
        """The switchover's event, with how long the pools' clients waited, and the owner told."""
        message = Message(
            N_("%(cause)s: %(new)s is the primary now (was %(old)s); writes resumed within %(s).1f s."),
            cause=Term(ha.CAUSE_WORDS["switchover"]),
            new=self.candidate,
            old=self.leader,
            s=paused_for,
        )
        transitions.log_event(self.cluster, "switchover", message, EventLevel.INFO)
        hooks.role_changed(self.cluster, message)

    def finish(self) -> None:
        """Patroni's answer; a refusal (nothing changed) is the user's error."""
        self.thread.join(max(0.0, self.deadline - time.monotonic()))
        if self.answer is not None and self.answer[0] != 200:
            raise ServiceError(
                N_("Patroni did not switch over: %(reason)s"),
                field="to",
                code="cluster.switchover_failed",
                params={"reason": self.answer[1].strip() or self.answer[0]},
            )
