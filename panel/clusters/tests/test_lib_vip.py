"""A floating address and vip-manager's configuration (panel/clusters/lib/vip.py): pure."""

from __future__ import annotations

import pytest

from panel.clusters.lib import etcd as etcd_lib
from panel.clusters.lib import vip

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


def test_loopback_is_refused_as_vip_manager_refuses_it() -> None:
    with pytest.raises(ValueError, match="loopback"):
        vip.check_interface("lo")


def test_the_host_of_a_stored_address() -> None:
    assert vip.host_of("198.18.0.200/28") == "198.18.0.200"
    assert vip.host_of("") == ""


def test_the_trigger_key_is_patronis_leader_key_of_the_scope() -> None:
    assert vip.trigger_key("cluster-abc") == "/pgpanel/cluster-abc/leader"
    with pytest.raises(ValueError):
        vip.trigger_key("a/b")


def test_the_configuration_has_vip_manager_1_0_2s_keys() -> None:
    assert vip.render(config()) == (
        "# Written by the control panel (panel/clusters/services/vip.py): not to be edited.\n"
        'ip: "198.18.0.200"\n'
        "netmask: 24\n"
        'interface: "eth0"\n'
        'trigger-key: "/pgpanel/cluster-abc/leader"\n'
        'trigger-value: "member-2"\n'
        'manager-type: "basic"\n'
        'dcs-type: "etcd"\n'
        "dcs-endpoints:\n"
        '  - "https://127.0.0.1:25258"\n'
        '  - "https://10.0.0.2:25258"\n'
        'etcd-ca-file: "/d/etcd/tls/ca.crt"\n'
        'etcd-cert-file: "/d/etcd/tls/client.crt"\n'
        'etcd-key-file: "/d/etcd/tls/client.key"\n'
        'etcd-user: "cluster-abc"\n'
        'etcd-password: "s3cr\\"t: #x"\n'
        "interval: 500\n"
        "retry-after: 250\n"
        "retry-num: 3\n"
    )


def test_without_an_etcd_user_no_credentials_are_written() -> None:
    text = vip.render(config(tls=TLS))
    assert "etcd-user" not in text and "etcd-password" not in text


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"interface": "eth 0"}, "not a network interface name"),
        ({"member": ""}, "member's name"),
        ({"endpoints": []}, "at least one etcd member"),
        ({"endpoints": ["http://127.0.0.1:2379"]}, "over TLS only"),
        ({"tls": etcd_lib.TlsPaths("", "", "")}, "CA, a client certificate"),
    ],
)
def test_a_configuration_that_could_not_work_is_refused(changes: dict[str, object], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        vip.render(config(**changes))


def test_a_rendered_configuration_gives_back_its_address_and_interface() -> None:
    text = vip.render(config(interface="bond0.100"))
    assert vip.parse_rendered(text) == (vip.FloatingAddress("198.18.0.200", 24), "bond0.100")
    with pytest.raises(ValueError, match="no ip"):
        vip.parse_rendered("netmask: 24\ninterface: eth0\n")
