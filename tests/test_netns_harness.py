"""The network-namespace harness (issue 39's first increment): nodes reach each other and the
bridge's root side over TCP and nothing else, a frozen node or one whose link is down stops
answering until it is thawed or its link is up, and nothing it made outlives it, not even after a
failed test or a crashed run."""

from __future__ import annotations

import errno
import ipaddress
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from panel.core.polling import wait_for
from tests.fixtures.netns import ROOT, needs_root, nh, start_listener

pytestmark = [pytest.mark.integration, needs_root]

# How long a node that should not answer is given to answer anyway (a negative needs a wait).
SILENCE = 1.0
ANSWER_TIMEOUT = 10.0


@pytest.fixture(scope="module")
def listening(netns: Any) -> Iterator[Any]:
    """The module's harness with a listener on node 2."""
    start_listener(netns, netns.node(2))
    yield netns


def _answer(harness: Any, node: Any, target: Any, timeout: float = ANSWER_TIMEOUT) -> bytes:
    with harness.connect(node, target.address, 7000, timeout) as conn:
        return conn.recv(16)


@pytest.fixture
def root_listener(netns: Any) -> Iterator[socket.socket]:
    """A listener of the root namespace on the bridge's address (a port the kernel picks)."""
    with socket.create_server((netns.layout.root_address, 0)) as server:
        yield server


def test_a_node_reaches_another_node_and_the_root_side_over_tcp(
    listening: Any, root_listener: socket.socket
) -> None:
    one, two = listening.node(1), listening.node(2)
    assert _answer(listening, one, two) == b"ok\n"

    port = root_listener.getsockname()[1]
    with listening.connect(one, listening.layout.root_address, port, ANSWER_TIMEOUT):
        root_listener.settimeout(ANSWER_TIMEOUT)
        conn, (peer, _) = root_listener.accept()
        conn.close()
    assert peer == one.address  # its own address, not a translated one


def _root_addresses() -> list[str]:
    """The root namespace's IPv4 addresses outside 198.18.0.0/24 (loopback included)."""
    rows = json.loads(nh.ip("-j", "-4", "addr", "show"))
    found = [info["local"] for row in rows for info in row.get("addr_info", [])]
    return [a for a in found if ipaddress.ip_address(a) not in nh.NETWORK]


def test_a_node_reaches_nothing_outside_its_slot(netns: Any) -> None:
    node = netns.node(1)
    routes = json.loads(nh.ip("-n", node.namespace, "-j", "-4", "route", "show", "table", "all"))
    main = [route["dst"] for route in routes if route.get("table", "main") == "main"]
    assert main == [str(netns.layout.network)], "a namespace has its slot's route and no other"
    assert not [route for route in routes if route["dst"] == "default"], "no default route in any table"

    # Root's loopback: the namespace's own 127.0.0.1 refuses, and root's listener sees nothing.
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        with pytest.raises(ConnectionRefusedError):
            netns.connect(node, "127.0.0.1", server.getsockname()[1], ANSWER_TIMEOUT)
        with pytest.raises(BlockingIOError):
            server.accept()

    sent = netns.tx_packets(node)
    other_slot = nh.Layout((netns.layout.slot + 1) % len(nh.SLOTS), 1).node_address(1)
    outside = [a for a in _root_addresses() if not a.startswith("127.")] + ["203.0.113.1", other_slot]
    for address in outside:
        with pytest.raises(OSError) as refused:
            netns.connect(node, address, 80, ANSWER_TIMEOUT)
        assert refused.value.errno == errno.ENETUNREACH, address
    assert netns.tx_packets(node) == sent, "a refused connection sent a packet"


def test_a_frozen_node_stops_answering_and_answers_once_thawed(listening: Any) -> None:
    one, two = listening.node(1), listening.node(2)
    frozen = listening.freeze(two)
    try:
        assert frozen, "the listener runs in node 2"
        # The kernel still completes the handshake; the stopped listener never answers.
        with listening.connect(one, two.address, 7000, ANSWER_TIMEOUT) as conn:
            conn.settimeout(SILENCE)
            with pytest.raises(TimeoutError):
                conn.recv(16)
            listening.thaw(two)
            conn.settimeout(ANSWER_TIMEOUT)
            assert conn.recv(16) == b"ok\n"
    finally:
        listening.thaw(two)
    assert _answer(listening, one, two) == b"ok\n"


def test_a_node_whose_link_is_down_is_cut_off_until_it_is_up(
    listening: Any, root_listener: socket.socket
) -> None:
    one, two = listening.node(1), listening.node(2)
    listening.link_down(two)
    try:
        with pytest.raises(OSError):
            listening.connect(one, two.address, 7000, SILENCE)
        with pytest.raises(OSError):
            listening.connect(two, listening.layout.root_address, root_listener.getsockname()[1], SILENCE)
        root_listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            root_listener.accept()
    finally:
        listening.link_up(two)

    def answers() -> bool:
        try:
            return _answer(listening, one, two, timeout=SILENCE) == b"ok\n"
        except OSError:
            return False

    assert wait_for(answers, ANSWER_TIMEOUT), "node 2 did not answer again after its link came up"


def _gone(pid: int) -> bool:
    return nh._start_time(pid) is None  # gone or a zombie (its parent died: nobody reaps it yet)


def test_nothing_it_made_outlives_a_failed_body(netns: Any) -> None:
    with pytest.raises(RuntimeError, match="the test failed"), nh.harness(nodes=2) as harness:
        prefix, token = harness.layout.prefix, harness.token
        assert prefix != netns.layout.prefix, "two harnesses at once take two slots"
        assert harness.layout.network != netns.layout.network
        sleepers = [harness.popen(node, ["sleep", "600"]) for node in harness.nodes]
        harness.freeze(harness.node(2))
        harness.link_down(harness.node(1))
        made = (
            [harness.layout.bridge] + [n.veth for n in harness.nodes] + [n.namespace for n in harness.nodes]
        )
        assert sorted(nh.remains(prefix, token)) == sorted(made)
        raise RuntimeError("the test failed")
    assert nh.remains(prefix, token) == []
    assert all(sleeper.returncode == -signal.SIGKILL for sleeper in sleepers)


# A run that dies with its harness up: it says what it made, and kills itself when told.
CRASHING_RUN = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import netns_harness as nh
with nh.harness(nodes=1) as harness:
    sleeper = harness.popen(harness.node(1), ["sleep", "600"])
    print(harness.layout.prefix, harness.token, sleeper.pid, flush=True)
    sys.stdin.readline()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_next_run_removes_what_a_crashed_run_left() -> None:
    argv = [sys.executable, "-c", CRASHING_RUN, str(ROOT / "scripts")]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as run:
        assert run.stdin is not None and run.stdout is not None
        prefix, token, sleeper = run.stdout.readline().split()
        # Under the claims' lock, so that no other test process's claim clears it first.
        with nh._locked():
            run.stdin.write("die\n")
            run.stdin.flush()
            assert run.wait(timeout=ANSWER_TIMEOUT) == -signal.SIGKILL
            assert nh.remains(prefix, token), "the crashed run left its harness"
            assert not _gone(int(sleeper))

    with nh.harness(nodes=1):  # any claim clears the leftovers of every slot it may take
        pass
    assert nh.remains(prefix, token) == []
    assert wait_for(lambda: _gone(int(sleeper)), ANSWER_TIMEOUT)


def test_a_harness_refuses_more_nodes_than_its_slot_holds() -> None:
    with pytest.raises(ValueError, match="1 to 4 nodes"):
        nh.Layout(8, 5)
    assert nh.Layout(0, 3).root_address == "198.18.0.1"
    assert [nh.Layout(0, 3).node_address(i) for i in (1, 2, 3)] == [
        "198.18.0.11",
        "198.18.0.12",
        "198.18.0.13",
    ]
    assert str(nh.Layout(15, 1).network) == "198.18.0.240/28"
    assert all(len(name) <= 15 for name in (nh.Layout(15, 4).bridge, nh.Layout(15, 4).veth(4)))


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(ROOT / "scripts" / "netns.py"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def test_the_operators_script_brings_nodes_up_shows_them_and_takes_them_down() -> None:
    # Slots 1-3: neither the operator's 0 nor the tests' own; another session may hold one.
    slot = next(
        (s for s in (1, 2, 3) if _script("up", "--nodes", "2", "--slot", str(s)).returncode == 0), None
    )
    assert slot is not None, "slots 1-3 all held"
    try:
        layout = nh.Layout(slot, 2)
        status = _script("status").stdout
        assert (
            f"slot {slot} (pgn{slot}): {layout.network}, root side {layout.root_address}; up; owner operator"
            in status
        )
        assert f"node 2: {layout.node_address(2)} in {layout.namespace(2)}, link UP" in status
        shown = _script("exec", "--slot", str(slot), "2", "--", "ip", "-br", "-4", "addr", "show", "eth0")
        assert f"{layout.node_address(2)}/28" in shown.stdout
        assert _script("up", "--nodes", "2", "--slot", str(slot)).returncode == 1, "a held slot is refused"
        token = nh.run_token(nh.owner(slot))
        assert nh.by_operator(nh.owner(slot)) and nh.remains(nh.prefix_of(slot), token)
    finally:
        assert _script("down", "--slot", str(slot)).returncode == 0
    assert nh.remains(nh.prefix_of(slot), token) == []
