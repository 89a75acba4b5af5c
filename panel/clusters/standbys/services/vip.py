"""A cluster's floating address (an operator's setting, ``manage.py cluster floating-address``):
the panel's follower (``standbys/engine/vip_follow.py``) on every member's node follows the cluster's
Patroni leader key in the panel's etcd and keeps the address on the node whose member leads
(``standbys/lib/vip.py``, ``standbys/engine/vip.py``).

Each member's node runs that member's follower, asked through the agent's route remote members
use (``remote_members.ask``), and its reconciler keeps it so (``supervise_here``). The nodes must
share one layer-2 network (the address answers ARP on the new primary's interface); each node's
interface is ``Node.vip_interface``. The follower reads as the scope's own etcd user, which reads
and writes only the cluster's scope (the narrowest user there is; Patroni's own).
"""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings

from panel.clusters.models import Cluster, ClusterMember, EventLevel, Node
from panel.clusters.services import transitions
from panel.clusters.standbys.engine import vip as engine
from panel.clusters.standbys.lib import vip as vip_lib
from panel.clusters.standbys.services import etcd, etcd_auth, ha_files, remote_members
from panel.core import runas
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

APPLY_TIMEOUT = 30.0
SUFFIX = ".json"


def directory() -> Path:
    """Root's own (0700): the configurations hold the scope's etcd password, and a cluster's
    user, whose server a tenant may make run commands, must not read another's, nor its own."""
    return Path(settings.PANEL_DATA_DIR) / "vip"


def config_path(member: ClusterMember) -> Path:
    return directory() / f"{ha_files.scope(member.cluster)}.{member.name}{SUFFIX}"


def _log_path(config: Path) -> Path:
    return config.with_suffix(".log")


def _refuse(words: str, code: str, **params: object) -> ServiceError:
    return ServiceError(words, field="address", code=code, params=params or None)


def check(cluster: Cluster, address: str) -> str:
    """``address`` as it is stored (``198.18.0.200/28``), or a refusal: not an IPv4 host in a
    network, a cluster without standbys or whose members share a node, an address taken."""
    try:
        parsed = vip_lib.parse_address(address)
    except ValueError as exc:
        raise _refuse(
            N_("This is not a floating address: %(reason)s"),
            "cluster.floating_address_invalid",
            reason=str(exc),
        ) from None
    members = list(cluster.members.all())
    if not cluster.is_local or cluster.num_nodes < 2 or not members:
        raise _refuse(
            N_("A floating address follows the primary among standbys: this cluster has none."),
            "cluster.floating_address_needs_standbys",
        )
    if len({member.node_id for member in members}) < len(members):
        # One node's followers would take the address from each other (each follows one name).
        raise _refuse(
            N_("A floating address needs each member of the cluster on a node of its own."),
            "cluster.floating_address_shared_node",
        )
    others = Cluster.objects.exclude(pk=cluster.pk).filter(floating_address__startswith=f"{parsed.ip}/")
    nodes = Node.objects.filter(address=parsed.ip) | Node.objects.filter(private_address=parsed.ip)
    if others.exists() or nodes.exists():
        raise _refuse(
            N_("The address %(address)s is already another cluster's or a node's."),
            "cluster.floating_address_taken",
            address=parsed.ip,
        )
    return str(parsed)


def set_floating_address(cluster: Cluster, address: str | None) -> list[str]:
    """Store the cluster's floating address (None or blank: none) and start, move or stop
    the follower on every member's node now; the nodes whose agent did not take it (their
    reconciler does, once it runs), each as a sentence."""
    stored = check(cluster, address) if address and address.strip() else ""
    if stored == cluster.floating_address:
        return []
    cluster.floating_address = stored
    cluster.save(update_fields=["floating_address", "updated_at"])
    if stored:
        transitions.log_event(
            cluster, "floating-address", Message(N_("Floating address set to %(address)s."), address=stored)
        )
    else:
        transitions.log_event(cluster, "floating-address", Message(N_("Floating address removed.")))
    missed: list[str] = []
    for member in ha_files.members_of(cluster):
        if not member.node.is_alive:  # its heartbeats stopped: no need to wait for the timeout
            missed.append(f"{member.node.name}: its agent is not answering")
            continue
        try:
            remote_members.ask(f"{__name__}.apply_here", member, timeout=APPLY_TIMEOUT)
        except (ServiceError, EngineError) as exc:
            log.warning("member %s: floating address not applied: %s", member, exc)
            missed.append(f"{member.node.name}: {getattr(exc, 'message', exc)}")
    if missed:
        transitions.log_event(
            cluster,
            "floating-address",
            Message(N_("Not applied yet on %(nodes)s: their reconciler will."), nodes=", ".join(missed)),
            EventLevel.WARNING,
        )
    return missed


def set_interface(node: Node, interface: str) -> None:
    """The node's interface for floating addresses; its members' followers move to it now."""
    try:
        node.vip_interface = vip_lib.check_interface(interface)
    except ValueError as exc:
        raise ServiceError(
            N_("This is not a network interface: %(reason)s"), field="interface",
            code="node.vip_interface_invalid", params={"reason": str(exc)},
        ) from None  # fmt: skip
    node.save(update_fields=["vip_interface"])
    for member in ClusterMember.objects.filter(node=node).exclude(cluster__floating_address=""):
        remote_members.ask(f"{__name__}.apply_here", member, timeout=APPLY_TIMEOUT)


def wanted(member: ClusterMember) -> str | None:
    """The member's follower configuration as it should be now; None: it should not run."""
    cluster = member.cluster
    if not cluster.floating_address:
        return None
    scope = ha_files.scope(cluster)
    return vip_lib.render(
        vip_lib.VipConfig(
            address=vip_lib.parse_address(cluster.floating_address),
            interface=member.node.vip_interface,
            scope=scope,
            member=member.name,
            endpoints=etcd.client_urls(),
            tls=etcd_auth.scope_tls(etcd.client_files(), scope),
        )
    )


def _stop(config: Path) -> None:
    """The follower of ``config`` stopped, the address it was given off its interface, and
    its configuration removed (its log stays)."""
    try:
        address, interface = vip_lib.parse_rendered(config.read_text())
    except (OSError, ValueError):
        address, interface = None, ""
    engine.stop(config, address, interface or settings.PANEL_VIP_INTERFACE)
    config.unlink(missing_ok=True)


def ensure(member: ClusterMember) -> str | None:
    """The member's follower as ``wanted`` says, on this node (its node); a note when it
    changed anything."""
    config = config_path(member)
    text = wanted(member)
    if text is None:
        if config.exists():  # (written before it starts, removed once it stopped: no process scan)
            _stop(config)
            return f"{member}: floating address follower stopped"
        return None
    current = config.read_text() if config.exists() else None
    if current == text and engine.is_running(config):
        return None
    if current != text and config.exists():
        _stop(config)  # the address or interface may be another: the old one comes off
    runas.make_private_dir(directory(), runas.current_user())
    runas.write_private_file(config, text, owner=runas.current_user())
    engine.start(config, _log_path(config))
    return f"{member}: floating address follower started"


@on_node(timeout=APPLY_TIMEOUT)
def apply_here(member: ClusterMember) -> None:
    try:
        ensure(member)
    except ValueError as exc:  # a node's interface name an operator mistyped in the database
        raise ServiceError(
            N_("The floating address could not be set up on this node: %(reason)s"), code="cluster.floating_address_failed",
            params={"reason": str(exc)},
        ) from None  # fmt: skip


def supervise_here() -> list[str]:
    """This node's reconciler: a follower for every member here of a cluster with a floating
    address (a stopped cluster's has no leader key: its address is nowhere), none for any other
    (a member moved or removed, its cluster deleted or its address gone)."""
    notes, kept = [], set()
    here = ClusterMember.objects.filter(node__name=settings.PANEL_NODE_NAME).select_related("cluster", "node")
    for member in here:
        config = config_path(member)
        kept.add(config)
        try:
            if note := ensure(member):
                notes.append(note)
        except (EngineError, ValueError, OSError) as exc:
            notes.append(f"{member}: floating address follower: {exc}")
    for config in sorted(directory().glob(f"*{SUFFIX}")) if directory().is_dir() else []:
        if config not in kept:
            running = engine.is_running(config)
            _stop(config)  # (a file without a process, e.g. of a member rolled back, goes quietly)
            if running:
                notes.append(f"floating address follower of {config.stem} stopped (no such member here)")
    return notes
