"""A floating address and its follower's configuration (panel/clusters/standbys/lib/vip.py): pure; the
follower (standbys/engine/vip_follow.py) reads back what is rendered."""

from __future__ import annotations

import json

import pytest

from panel.clusters.standbys.engine import vip_follow
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib import vip

TLS = etcd_lib.TlsPaths("/d/etcd/tls/ca.crt", "/d/etcd/tls/client.crt", "/d/etcd/tls/client.key")
SCOPED = etcd_lib.TlsPaths(TLS.ca, TLS.cert, TLS.key, user="cluster-abc", password='s3cr"t: #x')


def config(**changes: object) -> vip.VipConfig:
    values: dict[str, object] = {
        "address": vip.parse_address("198.18.0.200/24"),
        "interface": "eth0",
        "scope": "cluster-abc",
        "member": "member-2",
        "endpoints": ["https://127.0.0.1:25258", "https://10.0.0.2:25258"],
        "tls": SCOPED,
    }
    values.update(changes)
    return vip.VipConfig(**values)  # type: ignore[arg-type]


def test_an_address_is_an_ipv4_host_with_its_prefix() -> None:
    assert vip.parse_address(" 198.18.0.200/28 ") == vip.FloatingAddress("198.18.0.200", 28)
    assert str(vip.parse_address("10.1.2.3/8")) == "10.1.2.3/8"
    assert vip.parse_address("192.168.1.2/30").prefix == 30


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("198.18.0.200", "no prefix length"),
        ("198.18.0.300/24", "not an IP address"),
        ("not an address/24", "not an IP address"),
        ("2001:db8::5/64", "not an IPv4 address"),
        ("198.18.0.1/31", "no host address"),
        ("198.18.0.1/32", "no host address"),
        ("198.18.0.0/24", "network's own or its broadcast"),
        ("198.18.0.255/24", "network's own or its broadcast"),
        ("127.0.0.5/8", "loopback"),
        ("224.0.0.5/24", "multicast"),
        ("169.254.3.4/16", "link-local"),
        ("0.0.0.0/8", "loopback, multicast"),
    ],
)
def test_anything_else_is_refused_saying_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        vip.parse_address(text)


@pytest.mark.parametrize("name", ["eth0", "ens3", "enp0s31f6", "bond0.100", "br-lan", "a" * 15, "wlan_1"])
def test_interface_names_linux_takes_are_kept(name: str) -> None:
    assert vip.check_interface(name) == name


@pytest.mark.parametrize("name", ["", "a" * 16, "eth0 ", "eth/0", "eth:0", "-eth0", "..", "eth0;ls"])
def test_other_interface_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a network interface name"):
        vip.check_interface(name)


def test_loopback_is_refused_it_has_no_hardware_address_to_announce() -> None:
    with pytest.raises(ValueError, match="loopback"):
        vip.check_interface("lo")


def test_the_host_of_a_stored_address() -> None:
    assert vip.host_of("198.18.0.200/28") == "198.18.0.200"
    assert vip.host_of("") == ""


def test_the_trigger_key_is_patronis_leader_key_of_the_scope() -> None:
    assert vip.trigger_key("cluster-abc") == "/pgpanel/cluster-abc/leader"
    with pytest.raises(ValueError):
        vip.trigger_key("a/b")


def test_the_configuration_is_the_followers_json() -> None:
    assert json.loads(vip.render(config())) == {
        "endpoints": ["https://127.0.0.1:25258", "https://10.0.0.2:25258"],
        "ca": "/d/etcd/tls/ca.crt",
        "cert": "/d/etcd/tls/client.crt",
        "key": "/d/etcd/tls/client.key",
        "user": "cluster-abc",
        "password": 's3cr"t: #x',
        "trigger_key": "/pgpanel/cluster-abc/leader",
        "trigger_value": "member-2",
        "ip": "198.18.0.200",
        "prefix": 24,
        "interface": "eth0",
        "interval_ms": 500,
        "timeout_ms": 1000,
        "retry": 3,
    }


def test_the_follower_reads_what_is_rendered() -> None:
    loaded = vip_follow.load(vip.render(config()))
    assert (loaded.address, loaded.interface, loaded.trigger_value) == ("198.18.0.200/24", "eth0", "member-2")
    assert (loaded.user, loaded.password) == ("cluster-abc", 's3cr"t: #x')
    assert (loaded.interval_ms, loaded.timeout_ms, loaded.retry) == (500, 1000, 3)


def test_the_address_comes_off_within_a_few_seconds_of_etcd_silent() -> None:
    """Well inside Patroni's ttl (20 s): before another member may take the leader key."""
    assert vip.fail_closed_seconds(config()) == 4.5
    assert vip.fail_closed_seconds(config(interval_ms=200, timeout_ms=300, retry=2)) == 1.0


def test_without_an_etcd_user_the_follower_logs_in_as_no_one() -> None:
    text = vip.render(config(tls=TLS))
    assert json.loads(text)["user"] == "" and json.loads(text)["password"] == ""
    assert vip_follow.load(text).user == ""


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"interface": "eth 0"}, "not a network interface name"),
        ({"member": ""}, "member's name"),
        ({"endpoints": []}, "at least one etcd member"),
        ({"endpoints": ["http://127.0.0.1:2379"]}, "over TLS only"),
        ({"tls": etcd_lib.TlsPaths("", "", "")}, "CA, a client certificate"),
        ({"retry": 0}, "must be positive"),
        ({"interval_ms": -1}, "must be positive"),
    ],
)
def test_a_configuration_that_could_not_work_is_refused(changes: dict[str, object], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        vip.render(config(**changes))


def test_a_rendered_configuration_gives_back_its_address_and_interface() -> None:
    text = vip.render(config(interface="bond0.100"))
    assert vip.parse_rendered(text) == (vip.FloatingAddress("198.18.0.200", 24), "bond0.100")
    with pytest.raises(ValueError, match="no 'ip'"):
        vip.parse_rendered('{"prefix": 24, "interface": "eth0"}')
    with pytest.raises(ValueError):
        vip.parse_rendered("ip: 198.18.0.200\n")  # vip-manager's YAML of before: not JSON
