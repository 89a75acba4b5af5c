"""Integration: the panel's etcd over four "nodes" on loopback (real etcd 3.4 processes, each
node's data directory and ports its own, each started by the service functions its agent runs:
``ensure_here`` as that node, ``rebalance`` as any). An etcd from before (plain HTTP on loopback)
becomes the seed with its data; two members join (learners, promoted), one of them bringing the
keys of its own etcd of before; a key written through one
member is read through another; with the leader SIGKILLed the other two elect one and take writes;
a client without a certificate of the panel's etcd CA is refused (the attack) while Patroni's
own etcd3 client with the cluster's certificate files writes (the legitimate action); the dead
member's node drained: it is removed and a member joins on the fourth node; another node
drained (two active nodes left): one member stays, the others' nodes stop theirs.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from django.utils import timezone

from panel.clusters.models import EtcdMember, EtcdMemberState, Node, NodeState
from panel.clusters.services import nodes
from panel.clusters.standbys.engine import etcd as engine
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.services import etcd, etcd_membership, ha
from panel.core import runas
from panel.core.errors import ServiceError

pytestmark = pytest.mark.integration

TIMEOUT = 90.0


@contextlib.contextmanager
def as_node(node: Node) -> Iterator[None]:
    """This process as ``node``'s agent: its name, data directory and port range."""
    with override_settings(
        PANEL_NODE_NAME=node.name,
        PANEL_DATA_DIR=Path(node.data_dir),
        PANEL_PORT_RANGE=(node.port_first, node.port_last),
    ):
        yield


@pytest.fixture
def four_nodes(db: None) -> Iterator[list[Node]]:
    # The store these four nodes make, alone: an earlier module's cluster with standbys may have
    # left this node's member row (its etcd keeps running elsewhere; the deletion is rolled back).
    EtcdMember.objects.all().delete()
    suffix = secrets.token_hex(2)
    root = Path(django_settings.PANEL_DATA_DIR) / "etcd-nodes" / suffix
    _first, last = django_settings.PANEL_PORT_RANGE
    made = []
    for index, letter in enumerate("abcd"):
        data = root / letter
        data.mkdir(parents=True)
        for path in (data, data.parent, data.parent.parent):
            path.chmod(0o711)  # the runner user (etcd's) passes through
        low = last - 130 + 20 * index  # below the top ports, which this session's own node uses
        node = nodes.add_node(
            f"etcd-{letter}{suffix}",
            address="127.0.0.1",
            ports=(low, low + 19),
            data_dir=str(data),
            ram_gb=4,
            vcpus=4,
        )
        Node.objects.filter(pk=node.pk).update(last_heartbeat=timezone.now() + timezone.timedelta(hours=1))
        node.refresh_from_db()
        made.append(node)
    yield made
    for node in made:
        with as_node(node):
            engine.stop(etcd.data_dir(), timeout=5)
            for aside in etcd.root().glob("data*"):
                engine.stop(aside, timeout=5)
    shutil.rmtree(root, ignore_errors=True)


def _url(node: Node) -> str:
    with as_node(node):
        return etcd.peer_of(node).client_url


def _tls(node: Node) -> etcd_lib.TlsPaths:
    with as_node(node):
        return etcd.client_tls()


def _writes(node: Node, value: str) -> Callable[[], bool]:
    """For ``wait_until``: whether the store takes ``value`` (under /pgpanel/t/k) through ``node``."""

    def written() -> bool:
        try:
            engine.put([_url(node)], "/pgpanel/t/k", value, _tls(node))
        except runas.EngineError:
            return False
        return True

    return written


def _legacy_etcd(node: Node) -> int:
    """The etcd an older panel ran on ``node``: plain HTTP on loopback, named "panel"."""
    with as_node(node):
        client, peer = etcd.peer_of(node).client_port, etcd.peer_of(node).peer_port
        runas.make_private_dir(etcd.root(), runas.os_user())
        argv = [
            engine.ETCD,
            "--name=panel",
            f"--data-dir={etcd.data_dir()}",
            f"--listen-client-urls=http://127.0.0.1:{client}",
            f"--advertise-client-urls=http://127.0.0.1:{client}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=panel=http://127.0.0.1:{peer}",
        ]
        engine.start(argv, etcd.root() / "etcd.log", runas.os_user())
        return client


def _plain_put(port: int, key: str, value: str) -> tuple[int, str]:
    return patroni.rest("POST", port, "/v3/kv/put", {"key": engine._b64(key), "value": engine._b64(value)})


def test_three_members_form_one_store_that_outlives_one_and_refuses_strangers(
    four_nodes: list[Node], wait_until: Callable[..., object]
) -> None:
    a, b, c, d = four_nodes

    # An older panel's etcd on node A holds a cluster's keys: it becomes the seed, keys kept.
    port = _legacy_etcd(a)
    wait_until(
        lambda: _plain_put(port, "/pgpanel/old/config", "kept")[0] == 200, timeout=30, message="old etcd"
    )
    with as_node(a):
        note = etcd.ensure_here(a, TIMEOUT, claim=True)  # as before a cluster with standbys starts
    assert note and EtcdMember.objects.get(node=a).state == EtcdMemberState.RUNNING
    assert engine.get([_url(a)], "/pgpanel/old/config", _tls(a)) == "kept"
    with as_node(a):
        argv = engine.running_argv(etcd.data_dir()) or []
    assert "--client-cert-auth" in argv and "--peer-client-cert-auth" in argv
    assert f"--name={a.name}" in argv

    # Node B ran an etcd of its own before, with its cluster's keys: the leader key (with a lease)
    # is not copied, the others are; its data is put aside when it joins.
    port_b = _legacy_etcd(b)
    wait_until(lambda: _plain_put(port_b, "/pgpanel/on-b/config", "b's")[0] == 200, timeout=30, message="b's")
    lease = json.loads(patroni.rest("POST", port_b, "/v3/lease/grant", {"TTL": 600})[1])["ID"]
    body = {"key": engine._b64("/pgpanel/on-b/leader"), "value": engine._b64("member-1"), "lease": lease}
    assert patroni.rest("POST", port_b, "/v3/kv/put", body)[0] == 200

    # Three active nodes: two more members, each added and started by its own node's agent.
    with as_node(a):
        assert etcd_membership.rebalance() == [f"etcd: a member is to join on {b.name}"]
        assert etcd_membership.rebalance() == []  # one change at a time
    with as_node(b):
        started = time.monotonic()
        assert etcd.ensure_here(b, TIMEOUT) == f"etcd: {b.name} joined"
        print(f"{b.name}: added, started and promoted in {time.monotonic() - started:.1f} s")
        assert list(etcd.root().glob("data.retired-*"))
    assert engine.get([_url(a)], "/pgpanel/on-b/config", _tls(a)) == "b's"
    assert engine.get([_url(a)], "/pgpanel/on-b/leader", _tls(a)) is None
    assert engine.get([_url(a)], "/pgpanel/old/config", _tls(a)) == "kept"
    # The same through the reconciler's own step: node B chooses C, C's reconciler brings it in.
    with as_node(b):
        # No Patroni runs on this store: the reconciler turns etcd's authentication on as well,
        # and everything after goes on logged in as root (standbys/services/etcd_auth.py).
        assert ha.supervise_etcd() == [
            f"etcd: a member is to join on {c.name}",
            "etcd: authentication enabled (each cluster's Patroni logs in as its own user)",
        ]
    with as_node(c):
        started = time.monotonic()
        assert ha.supervise_etcd() == [f"etcd: {c.name} joined"]
        print(f"{c.name}: added, started and promoted in {time.monotonic() - started:.1f} s")

    # C's disk replaced: started as it was it would be a second, empty etcd at C's address. It
    # leaves the panel's etcd and joins again instead.
    with as_node(c):
        engine.stop(etcd.data_dir())
        shutil.rmtree(etcd.data_dir())
        lost_data = f"etcd: {c.name} lost its data: it leaves the panel's etcd and joins again"
        assert etcd.ensure_here(c, TIMEOUT) == lost_data
        assert engine.pid(etcd.data_dir()) is None
    with as_node(a):
        assert etcd_membership.rebalance() == [f"etcd: member {c.name} removed"]
        assert etcd_membership.rebalance() == [f"etcd: a member is to join on {c.name}"]
    with as_node(c):
        assert etcd.ensure_here(c, TIMEOUT) == f"etcd: {c.name} joined"
    assert set(EtcdMember.objects.values_list("state", flat=True)) == {EtcdMemberState.RUNNING}
    listed = engine.members([_url(a)], _tls(a))
    assert sorted(m.name for m in listed) == sorted(n.name for n in (a, b, c))
    assert all(m.peer_urls[0].startswith("https://") for m in listed)  # the seed's updated too
    with as_node(b):
        assert etcd.patroni_hosts() == tuple(f"127.0.0.1:{etcd.peer_of(n).client_port}" for n in (a, b, c))

    # A key written through one member is read through another.
    engine.put([_url(a)], "/pgpanel/t/k", "through a", _tls(a))
    assert engine.get([_url(c)], "/pgpanel/t/k", _tls(c)) == "through a"

    # The leader's machine lost: the other two keep a quorum, elect a leader and take writes.
    leader_id = engine.leader([_url(a)], _tls(a))
    lost = next(n for n in (a, b, c) if EtcdMember.objects.get(node=n).member_id == leader_id)
    kept, drained = [n for n in (a, b, c) if n != lost]
    with as_node(lost):
        engine.kill(etcd.data_dir())
        wait_until(lambda: engine.pid(etcd.data_dir()) is None, timeout=10, message="the leader gone")

    killed = time.monotonic()
    wait_until(_writes(drained, "leader gone"), timeout=30, message="a write with the leader gone")
    print(f"the leader of three SIGKILLed: a write through another after {time.monotonic() - killed:.1f} s")
    assert engine.get([_url(kept)], "/pgpanel/t/k", _tls(kept)) == "leader gone"
    assert engine.leader([_url(kept)], _tls(kept)) != leader_id

    _strangers_are_refused(kept, "/pgpanel/t/k", "leader gone")
    _patroni_writes_with_the_clusters_certificate(kept, drained)  # one of its hosts is dead

    # The lost node drained: its dead member goes first (etcd adds none while a voter is
    # unreachable), then a new member joins on the fourth node: three voters again.
    assert EtcdMember.objects.count() == 3  # four active nodes: still three members
    nodes.set_state(lost.name, NodeState.DRAINING)
    with as_node(kept):
        assert etcd_membership.rebalance() == [f"etcd: member {lost.name} removed"]
        assert etcd_membership.rebalance() == [f"etcd: a member is to join on {d.name}"]
    with as_node(d):
        assert etcd.ensure_here(d, TIMEOUT) == f"etcd: {d.name} joined"
    assert sorted(m.name for m in engine.members([_url(kept)], _tls(kept))) == sorted(
        n.name for n in (kept, drained, d)
    )

    # Another node drained: two active nodes call for one member; the oldest that answers stays.
    with pytest.raises(ServiceError) as refused:
        nodes.remove_node(drained.name)
    assert refused.value.code == "node.holds_etcd"
    nodes.set_state(drained.name, NodeState.DRAINING)
    notes: list[str] = []

    def shrunk() -> bool:
        # The reconciler's rounds: etcd may refuse a removal right after another ("unhealthy
        # cluster" until the rest have been connected for 5 s); the next round takes it.
        with as_node(kept):
            notes.extend(etcd_membership.rebalance())
        return EtcdMember.objects.count() == 1

    wait_until(shrunk, timeout=120, message="two members removed")
    removed = sorted(note for note in notes if note.endswith(" removed"))
    assert removed == sorted(f"etcd: member {n.name} removed" for n in (drained, d)), notes
    assert list(EtcdMember.objects.values_list("node", flat=True)) == [kept.pk]
    assert [m.name for m in engine.members([_url(kept)], _tls(kept))] == [kept.name]
    with as_node(drained):
        etcd.ensure_here(drained, TIMEOUT)  # its agent: it holds none now
        assert engine.pid(etcd.data_dir()) is None and not etcd.data_dir().exists()
        assert list(etcd.root().glob("data.retired-*"))  # put aside, not deleted

    # The last member alone commits (a write may time out while it settles after the removals,
    # as Patroni's would: it retries too).
    wait_until(_writes(kept, "alone"), timeout=30, message="a write on the last member")
    assert engine.get([_url(kept)], "/pgpanel/t/k", _tls(kept)) == "alone"
    nodes.remove_node(drained.name)  # no member there any more


def _strangers_are_refused(node: Node, key: str, value: str) -> None:
    """Plain HTTP, HTTPS without a client certificate and HTTPS with a certificate of another
    CA: each write refused, the key unchanged."""
    url, tls = _url(node), _tls(node)
    port = int(url.rsplit(":", 1)[1])
    status, text = _plain_put(port, key, "archive_command: owned")
    assert status != 200, text

    no_cert = ssl.create_default_context(cafile=tls.ca)
    with pytest.raises((ssl.SSLError, OSError, http.client.HTTPException)):
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=no_cert)
        conn.request("POST", "/v3/kv/put", body=b'{"key": "L3BncGFuZWwvdC9r", "value": "b3duZWQ="}')
        conn.getresponse().read()

    stranger_ca = etcd_lib.new_ca("someone else's CA")
    stranger = etcd_lib.issue(stranger_ca, "stranger", server=False)
    files = Path(tls.cert).parent.parent / "stranger"
    files.mkdir(exist_ok=True)
    (files / "c.crt").write_text(stranger.cert_pem)
    (files / "c.key").write_text(stranger.key_pem)
    own = etcd_lib.TlsPaths(tls.ca, str(files / "c.crt"), str(files / "c.key"))
    with pytest.raises(runas.EngineError):
        engine.put([url], key, "owned", own)
    assert engine.get([url], key, tls) == value


# Patroni's own etcd3 store, in a process of its own (its watcher and DNS threads, and the
# connection function it patches into urllib3, end with it).
PATRONI_WRITES = """
import json, os, sys
from patroni.dcs import get_dcs
dcs = get_dcs(json.loads(sys.argv[1]))
print("written" if dcs.set_config_value(sys.argv[2]) else "refused", flush=True)
os._exit(0)
"""


def _patroni_writes_with_the_clusters_certificate(reader: Node, writer: Node) -> None:
    """Patroni 4.1.5's etcd3 store (``get_dcs``), configured as a member's ``etcd3`` section says
    (every member, https, the client certificate), writes a cluster's ``/config``."""
    with as_node(writer):
        section = etcd_lib.patroni_section(etcd.patroni_hosts(), etcd.client_tls())
    assert section["protocol"] == "https" and len(section["hosts"]) == 3
    config = {"scope": "legit", "namespace": "/pgpanel/", "name": "member-1", "ttl": 20, "loop_wait": 1}
    config.update(retry_timeout=10, etcd3=section)
    argv = [sys.executable, "-c", PATRONI_WRITES, json.dumps(config), '{"ttl": 20}']
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "written", done.stderr[-2000:]
    assert engine.get([_url(reader)], "/pgpanel/legit/config", _tls(reader)) == '{"ttl": 20}'
