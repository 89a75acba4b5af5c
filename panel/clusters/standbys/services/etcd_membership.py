"""The panel's etcd membership (standbys/services/etcd.py has the whole story): one step at a time towards
the members the active nodes call for, run by any node's agent (the reconciler) under the CA
row's lock. A newcomer is only chosen here (its row ``joining``): its own agent adds, starts and
promotes it (``etcd.ensure_here``); a member of a drained or removed node, or one beyond the
count, is removed here with ``member remove`` through the others."""

from __future__ import annotations

from django.db import transaction

from panel.clusters.models import EtcdMember, EtcdMemberState, Node, NodeState
from panel.clusters.standbys.engine import etcd as engine
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.services.etcd import client_files, lock, peer_of, peer_of_row, serving
from panel.core.polling import wait_for
from panel.core.runas import EngineError

REMOVE_WAIT = 15.0


def wanted_count(active_nodes: int) -> int:
    return etcd_lib.QUORUM if active_nodes >= etcd_lib.QUORUM else etcd_lib.SINGLE


def rebalance() -> list[str]:
    """One step towards the members the active nodes call for: a newcomer chosen (its agent adds
    and starts it), or the members of drained and removed nodes (and any beyond the count)
    removed. Nothing while a newcomer is still joining (unless its node stopped answering or was
    drained: it is removed, a learner never counts for the quorum), or before the seed runs.
    Members already leaving go first: etcd adds no member while a voting one is unreachable."""
    with transaction.atomic():
        lock()
        rows = list(EtcdMember.objects.select_related("node"))
        running = [r for r in rows if r.state == EtcdMemberState.RUNNING]
        joining = [r for r in rows if r.state == EtcdMemberState.JOINING]
        stale = [
            r for r in joining if r.node is None or r.node.state != NodeState.ACTIVE or not r.node.is_alive
        ]
        if not running or len(stale) < len(joining):
            return []  # its agent is at it
        for row in stale:  # its node went silent or was drained before it joined: another is chosen
            row.state = EtcdMemberState.LEAVING
            row.save(update_fields=["state"])
        if not any(r.state == EtcdMemberState.LEAVING for r in rows):
            chosen = _choose(rows, running)
            if chosen:
                return [f"etcd: a member is to join on {chosen.name}"]  # removals wait until it votes
    return _remove_leaving()


def _choose(rows: list[EtcdMember], running: list[EtcdMember]) -> Node | None:
    """The node a newcomer goes to (its row made, ``joining``), or else the members that leave
    marked ``leaving``."""
    active = list(Node.objects.filter(state=NodeState.ACTIVE).order_by("created_at", "name"))
    target = wanted_count(len(active))
    keep = [r for r in running if r.node is not None and r.node.state == NodeState.ACTIVE]
    goes = [r for r in running if r not in keep]
    holders = {r.node_id for r in rows}
    candidates = [n for n in active if n.pk not in holders and n.is_alive]
    tls = client_files()
    answers = {r.pk: engine.healthy(peer_of_row(r).client_url, tls) for r in running}
    if any(not answers[r.pk] for r in goes):
        # The silent ones first: removing a dead member never hurts the quorum, and etcd adds no
        # member while a voting one is unreachable.
        goes = [r for r in goes if not answers[r.pk]]
    elif len(keep) < target and candidates:
        newcomer = candidates[0]
        peer = peer_of(newcomer)
        EtcdMember.objects.create(
            node=newcomer,
            name=peer.name,
            host=peer.host,
            client_port=peer.client_port,
            peer_port=peer.peer_port,
        )
        return newcomer
    elif len(keep) > target:
        # Members that answer stay, the oldest first: a dead one must not be all that is left.
        keep.sort(key=lambda row: not answers[row.pk])
        goes += keep[target:]
        keep = keep[:target]
    if not keep and goes:  # the last member never leaves: one that answers, if any
        survivor = next((r for r in running if answers[r.pk]), running[0])
        keep, goes = [survivor], [r for r in goes if r != survivor]
    for row in goes:
        row.state = EtcdMemberState.LEAVING
        row.save(update_fields=["state"])
    return None


def _remove_leaving() -> list[str]:
    """``member remove`` of every leaving member, through the members that stay; its row goes.
    etcd refuses to remove a voting member unless the rest keep a quorum of members it has
    reached for 5 s ("unhealthy cluster"): members that do not answer go first (removing a dead
    one never hurts the quorum), and a refusal is tried again for a few seconds (a member that
    joined just now)."""
    notes = []
    tls = client_files()
    leaving = list(EtcdMember.objects.filter(state=EtcdMemberState.LEAVING))
    leaving.sort(key=lambda row: engine.healthy(peer_of_row(row).client_url, tls))
    for row in leaving:
        urls = [peer_of_row(r).client_url for r in serving()]
        me = peer_of_row(row)
        found = next(
            (m for m in engine.members(urls, tls) if m.id == row.member_id or me.peer_url in m.peer_urls),
            None,
        )
        if found is not None and not _remove(urls, found.id, tls):
            notes.append(f"etcd: member {row.name} cannot leave yet (etcd: unhealthy cluster)")
            continue
        row.delete()
        notes.append(f"etcd: member {row.name} removed")
    return notes


def _remove(urls: list[str], member_id: str, tls: etcd_lib.TlsPaths) -> bool:
    def removed() -> bool:
        try:
            engine.remove(urls, member_id, tls)
        except EngineError as exc:
            if "unhealthy cluster" in str(exc):
                return False
            # No answer in time (the leader leaving, an election): look whether it went.
            try:
                return all(m.id != member_id for m in engine.members(urls, tls))
            except EngineError:
                raise exc from None
        return True

    return wait_for(removed, REMOVE_WAIT, interval=1.0)
