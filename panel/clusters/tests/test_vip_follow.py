"""The floating address's follower (panel/clusters/standbys/engine/vip_follow.py), its pure parts: what one
round decides, the configuration it accepts, how it reads ``ip address show``. It running against
a real etcd on nodes of their own is tests/test_netns_vip.py's; here it runs once with etcd nowhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from panel.clusters.standbys.engine import vip as engine
from panel.clusters.standbys.engine import vip_follow
from panel.clusters.standbys.engine.vip_follow import Decision, decide
from panel.core.polling import wait_for

ME, OTHER = "member-1", "member-2"
RETRY = 3


def test_the_key_naming_this_member_means_here_and_any_other_means_not() -> None:
    assert decide(True, ME, ME, None, 0, RETRY) == Decision(True, 0)
    assert decide(True, OTHER, ME, True, 0, RETRY) == Decision(False, 0)
    assert decide(True, None, ME, True, 0, RETRY) == Decision(False, 0)  # no leader: nowhere
    assert decide(True, "", ME, True, 0, RETRY) == Decision(False, 0)


def test_a_round_without_etcd_keeps_things_as_they_are_until_retry_rounds() -> None:
    assert decide(False, None, ME, True, 0, RETRY) == Decision(True, 1)
    assert decide(False, None, ME, True, 1, RETRY) == Decision(True, 2)
    assert decide(False, None, ME, False, 1, RETRY) == Decision(False, 2)
    assert decide(False, None, ME, None, 0, RETRY) == Decision(None, 1)  # never read: nothing done


def test_retry_rounds_without_etcd_take_the_address_off_fail_closed() -> None:
    assert decide(False, None, ME, True, 2, RETRY) == Decision(False, 3)
    assert decide(False, None, ME, None, 2, RETRY) == Decision(False, 3)  # a leftover comes off
    assert decide(False, None, ME, False, 7, RETRY) == Decision(False, 8)
    assert decide(False, None, ME, True, 0, 1) == Decision(False, 1)


def test_etcd_answering_again_counts_from_zero() -> None:
    assert decide(True, ME, ME, False, 5, RETRY) == Decision(True, 0)


def test_a_whole_run_of_rounds() -> None:
    """What the loop feeds ``decide``: the address comes, stays through two silent rounds, goes
    at the third, comes back when etcd names this member again, goes when it names another."""
    rounds = [(True, ME), (False, None), (False, None), (False, None), (True, ME), (True, OTHER)]
    holding, failures, seen = None, 0, []
    for readable, value in rounds:
        decision = decide(readable, value, ME, holding, failures, RETRY)
        holding, failures = decision.hold, decision.failures
        seen.append(holding)
    assert seen == [True, True, True, False, True, False]


CONFIG = {
    "endpoints": ["https://10.0.0.1:2379"],
    "ca": "/ca",
    "cert": "/c",
    "key": "/k",
    "user": "cluster-abc",
    "password": "pw",
    "trigger_key": "/pgpanel/cluster-abc/leader",
    "trigger_value": ME,
    "ip": "10.0.0.50",
    "prefix": 24,
    "interface": "eth0",
    "interval_ms": 500,
    "timeout_ms": 1000,
    "retry": 3,
}


def test_a_configuration_is_read_with_its_types() -> None:
    config = vip_follow.load(json.dumps(CONFIG))
    assert config.address == "10.0.0.50/24" and config.endpoints == ["https://10.0.0.1:2379"]


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"ip": None}, "ip: missing"),
        ({"prefix": "24"}, "prefix: missing or not of type int"),
        ({"retry": True}, "retry: missing or not of type int"),
        ({"endpoints": "https://10.0.0.1:2379"}, "endpoints: missing or not of type list"),
        ({"endpoints": []}, "no etcd member"),
        ({"endpoints": [7]}, "no etcd member"),
        ({"interval_ms": 0}, "must be positive"),
    ],
)
def test_a_configuration_with_a_field_missing_or_wrong_is_refused(
    changes: dict[str, object], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        vip_follow.load(json.dumps({**CONFIG, **changes}))


def test_ip_output_is_read_for_the_exact_address() -> None:
    out = (
        "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\\       valid_lft forever\n"
        "2: eth0    inet 10.0.0.50/24 scope global secondary eth0\\       valid_lft forever\n"
    )
    assert vip_follow.shows(out, "10.0.0.50/24")
    assert not vip_follow.shows(out, "10.0.0.50/25")
    assert not vip_follow.shows(out, "10.0.0.5/2")
    assert not vip_follow.shows("", "10.0.0.50/24")


def test_it_imports_nothing_of_django_or_the_panel() -> None:
    """Run as the engine runs it (``python -I``): without a configuration it says how to call
    it; and loading it pulls in no module of the panel or of Django."""
    result = subprocess.run(
        [sys.executable, "-I", str(engine.SCRIPT)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "usage: vip_follow.py --config=PATH" in result.stderr
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1]); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('panel', 'django')))"
    )
    shown = subprocess.run(
        [sys.executable, "-I", "-c", code, str(engine.SCRIPT)], capture_output=True, text=True, check=True
    )
    assert shown.stdout.strip() == "[]"


def test_without_etcd_it_fails_closed_and_says_each_change_once(tmp_path: Path) -> None:
    """The real script with etcd nowhere and an interface that does not exist: it says etcd is
    silent once, fails closed after ``retry`` rounds, says the interface's error once however
    many rounds follow, and leaves on SIGTERM."""
    config = tmp_path / "follow.json"
    fast = {**CONFIG, "endpoints": ["https://127.0.0.1:9"], "interface": "vipnone0"}
    config.write_text(json.dumps({**fast, "interval_ms": 50, "timeout_ms": 100, "retry": 2}))
    log = tmp_path / "follow.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(engine.argv(config), stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_for(lambda: "the interface:" in log.read_text(), 10, interval=0.05), log.read_text()
        time.sleep(1.0)  # several more rounds
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=10)
    finally:
        proc.kill()
    lines = log.read_text().splitlines()
    said = [line.split(": ", 1)[1] for line in lines]
    assert said[0].startswith("following /pgpanel/cluster-abc/leader for member-1: 10.0.0.50/24 on vipnone0")
    assert sum("etcd did not answer: https://127.0.0.1:9" in s for s in said) == 1, lines
    assert sum("(fail closed)" in s for s in said) == 1, lines
    assert sum(s.startswith("the interface:") and "vipnone0" in s for s in said) == 1, lines
    assert code == 1 and said[-1].startswith("stopped, the address not removed"), lines
