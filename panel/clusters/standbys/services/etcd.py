"""The panel's etcd cluster: one for every node, Patroni's consensus store (each cluster under its
own scope). One member while fewer than three nodes are active, three on three nodes from then
on (quorum survives the loss of one). The rows (``EtcdMember``) say which nodes hold a member;
each node's agent runs its own (``ensure_here``, from the reconciler and before a cluster's
members start) and any agent changes the membership (``etcd_membership.rebalance``): a newcomer is added as a
learner by its own agent, started with ``initial-cluster-state=existing`` and promoted once it
caught up (the quorum never counts a member that has not started); a member of a drained or
removed node is removed with ``member remove``, then its node's agent stops it and puts its data
aside. An etcd that ran before (one per node, on loopback) becomes the seed with its data.

TLS everywhere, with certificates of the panel's etcd CA (its key encrypted in the database):
each agent issues its node's server/peer certificate and the client certificate that the panel
and Patroni use (PANEL_DATA_DIR/etcd/tls, the runner's, 0600); each cluster's ``ha`` directory
gets its own copy for Patroni, owned by the cluster's user (``ha_files``). The certificate only
lets a client talk: what it may read and write is its etcd user's (``etcd_auth``): the panel's
is ``root``, each cluster's Patroni has its own.
"""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from panel import crypto
from panel.clusters.models import EtcdAuthority, EtcdMember, EtcdMemberState, Node
from panel.clusters.services.ports import etcd_ports
from panel.clusters.standbys.engine import etcd as engine
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib.patroni import NAMESPACE
from panel.core import runas
from panel.core.polling import wait_for
from panel.core.runas import EngineError

log = logging.getLogger(__name__)

CA_NAME = "panel"


def root() -> Path:
    return Path(settings.PANEL_DATA_DIR) / "etcd"


def data_dir() -> Path:
    return root() / "data"


def tls_dir() -> Path:
    return root() / "tls"


def server_tls() -> etcd_lib.TlsPaths:
    d = tls_dir()
    return etcd_lib.TlsPaths(str(d / "ca.crt"), str(d / "server.crt"), str(d / "server.key"))


def client_tls() -> etcd_lib.TlsPaths:
    """The panel's: this node's client certificate, logged in as etcd's ``root``."""
    d = tls_dir()
    password = crypto.derived_secret(f"etcd user {etcd_lib.ROOT}")
    return etcd_lib.TlsPaths(
        str(d / "ca.crt"), str(d / "client.crt"), str(d / "client.key"), etcd_lib.ROOT, password
    )


# --- the CA and this node's certificates -------------------------------------------------------------


def authority() -> etcd_lib.KeyPair:
    """The panel's etcd CA, made at its first use."""
    row = EtcdAuthority.objects.filter(name=CA_NAME).first()
    if row is None:
        pair = etcd_lib.new_ca()
        row = EtcdAuthority(name=CA_NAME, cert_pem=pair.cert_pem)
        row.key_pem = pair.key_pem
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:  # another agent made it first
            row = EtcdAuthority.objects.get(name=CA_NAME)
    return etcd_lib.KeyPair(row.cert_pem, row.key_pem)


def _address(node: Node) -> str:
    """Where the node's member is reached: its private address, else its address ("localhost",
    a one-machine panel's, as 127.0.0.1: one address that names the same listener everywhere)."""
    address = node.private_address or node.address
    return "127.0.0.1" if address == "localhost" else address


def _bind_address(host: str) -> str:
    """etcd binds IP addresses (and localhost) only: a name is resolved here."""
    if host == "localhost":
        return host
    try:
        return str(socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0])  # an IP address
    except (OSError, IndexError):
        return host


def peer_of(node: Node) -> etcd_lib.Peer:
    client, peer = etcd_ports(node)
    return etcd_lib.Peer(node.name, _address(node), client, peer)


def peer_of_row(row: EtcdMember) -> etcd_lib.Peer:
    return etcd_lib.Peer(row.name, row.host, row.client_port, row.peer_port)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def write_node_certificates(node: Node) -> bool:
    """This node's certificates: its member's (server and peer, naming its address, loopback
    and localhost) and its client's, issued by the panel's CA when missing, signed by another
    CA, near their end or naming other addresses. True when any was written (a running etcd
    must be started again: it reads its trusted CA once)."""
    ca = authority()
    runner = runas.os_user()
    runas.make_private_dir(root(), runner)
    runas.make_private_dir(tls_dir(), runner)
    server, client = server_tls(), client_tls()
    host = _address(node)
    hosts = list(dict.fromkeys([host, _bind_address(host), "127.0.0.1", "localhost"]))
    changed = _read(server.ca) != ca.cert_pem
    if changed:
        runas.write_private_file(Path(server.ca), ca.cert_pem, owner=runner)
    for paths, name, names, is_server in (
        (server, node.name, hosts, True),
        (client, f"{node.name} client", (), False),
    ):
        cert = _read(paths.cert)
        named = not is_server and etcd_lib.names_a_user(cert)  # one of before: a user without a password
        if not changed and not named and etcd_lib.signed_by(cert, ca.cert_pem, names):
            continue
        pair = etcd_lib.issue(ca, name, names, server=is_server)
        runas.write_private_file(Path(paths.key), pair.key_pem, owner=runner)
        runas.write_private_file(Path(paths.cert), pair.cert_pem, owner=runner)
        changed = True
    return changed


def client_files() -> etcd_lib.TlsPaths:
    """This node's client certificate (issued first when needed): the panel's and Patroni's."""
    node = Node.objects.filter(name=settings.PANEL_NODE_NAME).first()
    if node is not None:
        write_node_certificates(node)
    return client_tls()


# --- what the rows say -------------------------------------------------------------------------------


def serving() -> list[EtcdMember]:
    return list(EtcdMember.objects.filter(state=EtcdMemberState.RUNNING))


def patroni_hosts(fallback: Node | None = None) -> tuple[str, ...]:
    """``host:port`` of every voting member, as Patroni's ``etcd3.hosts`` lists them (none yet:
    the member ``fallback``'s node will be, the seed)."""
    hosts = tuple(peer_of_row(row).client_host for row in serving())
    if not hosts and fallback is not None:
        hosts = (peer_of(fallback).client_host,)
    return hosts


def client_urls() -> list[str]:
    """The voting members' client URLs, this node's own first (over loopback)."""
    urls: list[str] = []
    for row in serving():
        if row.name == settings.PANEL_NODE_NAME:
            urls.insert(0, f"https://127.0.0.1:{row.client_port}")
        else:
            urls.append(peer_of_row(row).client_url)
    return urls


def wait_answering(timeout: float) -> bool:
    """Until a voting member says it is healthy (it has a leader: a quorum)."""
    tls = client_files()
    return wait_for(lambda: any(engine.healthy(url, tls) for url in client_urls()), timeout, interval=0.5)


def delete_prefix(prefix: str) -> None:
    """A scope's keys out of the panel's etcd (a deleted cluster, a removed member)."""
    urls = client_urls()
    if not urls:
        return
    try:
        engine.delete_prefix(urls, prefix, client_files())
    except EngineError as exc:
        log.warning("etcd: %s not deleted: %s", prefix, exc)


def lock() -> None:
    """Membership changes one at a time across every agent: the CA's row, locked."""
    authority()
    list(EtcdAuthority.objects.select_for_update().filter(name=CA_NAME))


# --- this node's member -------------------------------------------------------------------------------


def _has_data() -> bool:
    return (data_dir() / "member").is_dir()


def ensure_here(node: Node, timeout: float, *, claim: bool = False) -> str | None:
    """This node's part of the panel's etcd: its member running as the rows say (started,
    restarted when its flags or certificates changed; a joining one added, started, promoted),
    or none running when it holds none. ``claim``: a cluster here needs etcd now, so with no
    member anywhere this node becomes the seed, on the data its etcd has (an installation from
    before keeps its clusters' keys). A note when it did something."""
    with transaction.atomic():
        lock()
        row = EtcdMember.objects.filter(node=node).first()
        if row is None and claim and not EtcdMember.objects.exists():
            peer = peer_of(node)
            row = EtcdMember.objects.create(
                node=node,
                name=peer.name,
                host=peer.host,
                client_port=peer.client_port,
                peer_port=peer.peer_port,
                state=EtcdMemberState.RUNNING,
            )
    if row is None:
        return _retire_here()
    if row.state == EtcdMemberState.LEAVING:
        return None  # still voting until ``member remove``; then the row goes
    return _run_here(node, row, timeout)


def _run_here(node: Node, row: EtcdMember, timeout: float) -> str | None:
    changed = write_node_certificates(node)
    peer = peer_of(node)
    if (row.host, row.client_port, row.peer_port) != (peer.host, peer.client_port, peer.peer_port):
        # The node's address or port range changed: the member follows (its peer URL below).
        row.host, row.client_port, row.peer_port = peer.host, peer.client_port, peer.peer_port
        row.save(update_fields=["host", "client_port", "peer_port"])
    me = peer_of_row(row)
    tls = client_tls()
    others = [r for r in serving() if r.pk != row.pk]
    joining = row.state == EtcdMemberState.JOINING
    if not joining and others and not _has_data() and engine.running_argv(data_dir()) is None:
        # Its data is gone (a new disk): started "new" it would be a second, empty etcd cluster
        # answering at the member's address. It leaves, and joins again as a newcomer.
        EtcdMember.objects.filter(pk=row.pk).update(state=EtcdMemberState.LEAVING)
        return f"etcd: {row.name} lost its data: it leaves the panel's etcd and joins again"
    note = None
    if joining and not row.member_id:
        urls = [peer_of_row(r).client_url for r in others]
        note = _put_aside(urls)  # an etcd of before on this node: not the one it joins
        row.member_id = _add_learner(urls, me.peer_url, tls, timeout)
        row.save(update_fields=["member_id"])
        note = f"etcd: {row.name} added as a learner"
    members = [*(peer_of_row(r) for r in others), me] if joining else [me]
    argv = etcd_lib.member_argv(
        engine.ETCD, me, members, str(data_dir()), server_tls(), joining=joining, bind=_bind_address(me.host)
    )
    running = engine.running_argv(data_dir())
    if running is not None and (changed or etcd_lib.essential(running) != etcd_lib.essential(argv)):
        engine.stop(data_dir())
        running = None
        note = f"etcd: {row.name} started again with new settings"
    if running is None:
        runas.make_private_dir(root(), runas.os_user())
        engine.start(argv, root() / "etcd.log", runas.os_user())
        note = note or f"etcd: started {row.name}"
    local = f"https://127.0.0.1:{me.client_port}"
    if joining:
        urls = [peer_of_row(r).client_url for r in others]
        if not engine.wait_for_promotion(urls, row.member_id, tls, timeout):
            raise EngineError(
                f"etcd member {row.name} did not catch up within {timeout:.0f} s: {_log_tail()}"
            )
        EtcdMember.objects.filter(pk=row.pk).update(state=EtcdMemberState.RUNNING)
        note = f"etcd: {row.name} joined"
    if not engine.wait_healthy(local, tls, timeout):
        raise EngineError(
            f"etcd did not answer on port {me.client_port} within {timeout:.0f} s: {_log_tail()}"
        )
    _fix_own_entry(row, me, local, tls)
    return note


def _log_tail(lines: int = 5) -> str:
    """The end of this node's etcd log, for an error's message."""
    return " | ".join(_read(str(root() / "etcd.log")).splitlines()[-lines:])


def _add_learner(urls: list[str], peer_url: str, tls: etcd_lib.TlsPaths, timeout: float) -> str:
    """``member add --learner``, again while etcd says "unhealthy cluster": it adds a member only
    once its leader has reached every voting member for 5 s (a member that just joined)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return engine.add_learner(urls, peer_url, tls)
        except EngineError as exc:
            if "unhealthy cluster" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(1)


def _fix_own_entry(row: EtcdMember, me: etcd_lib.Peer, local: str, tls: etcd_lib.TlsPaths) -> None:
    """The seed learns its id; a member whose peer URL etcd keeps from before (the loopback etcd
    of an older panel, or a changed address) gets it updated, so that newcomers reach it."""
    listed = engine.members([local], tls)
    mine = next((m for m in listed if m.id == row.member_id), None)
    if mine is None and len(listed) == 1:
        mine = listed[0]
        EtcdMember.objects.filter(pk=row.pk).update(member_id=mine.id)
    if mine is not None and mine.peer_urls != (me.peer_url,):
        engine.update_peer([local], mine.id, me.peer_url, tls)
        log.info("etcd: %s advertises %s to its peers now", row.name, me.peer_url)


def _retire_here() -> str | None:
    """No member here: a running etcd stopped, and its data put aside once another node holds the
    panel's etcd (a removed member cannot come back with its old data; nothing is deleted)."""
    if EtcdMember.objects.exists():
        return _put_aside(client_urls())
    if engine.running_argv(data_dir()) is not None:
        engine.stop(data_dir())
        return "etcd: stopped this node's etcd (the panel's etcd has no member yet)"
    return None


def _put_aside(urls: list[str]) -> str | None:
    """This node's etcd stopped and its data renamed ``data.retired-<time>``. An etcd of an older
    panel (plain HTTP on loopback, its own clusters' scopes) gives its keys to the panel's etcd
    (``urls``) first, those that exist there already excepted, so that its clusters keep their
    settings and history; keys with a lease (leader and member keys, which Patroni renews) are
    not copied: without their lease they would never expire."""
    notes = []
    running = engine.running_argv(data_dir())
    legacy = running is not None and "--client-cert-auth" not in running
    if legacy and urls:
        port = _legacy_port(running or [])
        tls = client_files()
        copied = 0
        for key, value, leased in engine.legacy_keys(port, NAMESPACE):
            if not leased and engine.put_absent(urls, key, value, tls):
                copied += 1
        notes.append(f"{copied} key(s) of this node's etcd of before copied into the panel's etcd")
    if running is not None:
        engine.stop(data_dir())
        notes.append("this node's etcd stopped (it holds no member)")
    if _has_data():
        aside = data_dir().with_name(f"data.retired-{int(time.time())}")
        data_dir().rename(aside)
        notes.append(f"its data put aside in {aside}")
    return "etcd: " + "; ".join(notes) if notes else None


def _legacy_port(argv: list[str]) -> int:
    """The client port of an etcd of before (``--listen-client-urls=http://127.0.0.1:PORT``)."""
    for arg in argv:
        if arg.startswith("--listen-client-urls="):
            return int(arg.rsplit(":", 1)[1].split(",")[0])
    raise EngineError("The etcd of before names no client URL.")
