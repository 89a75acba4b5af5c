"""HAProxy in front of a cluster's members: its configuration (the cluster's port on the primary,
the read-only port on the standbys, the trusted sources' rule) and the names of the files beside
it. Pure: text in and out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from panel.clusters.lib import firewall
from panel.clusters.standbys.lib.patroni import HaCluster, Member

# HAProxy's pattern file of trusted sources, beside haproxy.cfg (``lib.firewall``).
HAPROXY_SOURCES = "trusted_sources.lst"
# A reload hands the servers' states (which member is up where) to the new HAProxy: saved from
# the old one's admin socket (in the cluster's socket directory) into the state file (beside the
# pid file), which the new one reads when it starts. Without it a new HAProxy takes every member
# for up until its checks say otherwise, and may send a client of the primary port to a standby.
HAPROXY_SOCKET = "haproxy.sock"
HAPROXY_STATE = "haproxy.state"


def render_haproxy(
    listen: Sequence[str],
    port: int,
    cluster: HaCluster,
    pidfile: str,
    standby_port: int | None = None,
    floating: tuple[str, int, int | None] | None = None,
) -> str:
    """HAProxy in front of the members: the cluster's port reaches whichever one answers 200 to
    ``GET /primary`` on its REST port (only the leader does); clients of a member that stops
    being primary are cut so that they reconnect to the new one. ``standby_port``: reads served
    by a standby (``_standby_listen``). Both refuse addresses outside the cluster's
    ``haproxy_sources`` (``_sources_rule``).

    ``floating``: the cluster's floating address and its two ports (the cluster's own, on every
    node), bound too. Without it a client of the floating address met no listener: HAProxy bound
    only the node's addresses, and an entry on another node listens on ports of its own. Bound
    ``transparent`` (Linux's IP_FREEBIND, which needs no privilege), since the address is on
    this node only while its member leads."""
    lines = [
        "# Written by the control panel; edits here are overwritten.",
        "global",
        "    maxconn 2000",
        f"    pidfile {pidfile}",
        f"    stats socket {cluster.socket_dir}/{HAPROXY_SOCKET} mode 600 level admin",
        f"    server-state-file {pidfile.rpartition('/')[0]}/{HAPROXY_STATE}",
        "defaults",
        "    mode tcp",
        "    load-server-state-from-file global",
        # A connection to a member that has just stopped (a switchover, before its check says so)
        # is refused: it is tried again after min(timeout connect, 1 s), on another server
        # (redispatch on every retry), so a direct client waits for the new primary's check, not
        # for three turns of a second.
        "    timeout connect 500ms",
        "    retries 3",
        "    option redispatch 1",
        "    timeout client 1h",
        "    timeout server 1h",
        "    timeout check 2s",
        "listen primary",
    ]
    lines += [f"    bind {address}:{port}" for address in listen]
    if floating is not None:
        lines.append(f"    bind {floating[0]}:{floating[1]} transparent")
    lines.append(_sources_rule(cluster.haproxy_sources))
    lines += [
        "    option httpchk GET /primary",
        "    http-check expect status 200",
        "    default-server inter 500ms fall 1 rise 1 on-marked-down shutdown-sessions",
    ]
    lines += [
        f"    server {m.name} {m.host}:{m.port}{_source(m)} check port {m.rest_port}" for m in cluster.members
    ]
    if standby_port:
        lines += _standby_listen(listen, standby_port, cluster)
        lines.insert(lines.index("listen standby") + 1 + len(listen), _sources_rule(cluster.haproxy_sources))
        if floating is not None and floating[2]:
            lines.append(f"    bind {floating[0]}:{floating[2]} transparent")
    return "\n".join(lines) + "\n"


def _source(member: Member) -> str:
    """A member on HAProxy's node is reached from ``firewall.HAPROXY_SOURCE``, from which its
    pg_hba.conf lets no panel role in (loopback lets the members' own logins in)."""
    try:
        address = ipaddress.ip_address(member.host)
    except ValueError:
        return ""
    return f" source {firewall.HAPROXY_SOURCE}" if address.version == 4 and address.is_loopback else ""


def _sources_rule(sources_file: str) -> str:
    """Only HAProxy sees a client's own address (PostgreSQL sees HAProxy's): every listen section
    refuses a connection whose source is not in the file, before a byte is forwarded. Without a
    file nobody is let in (fail closed)."""
    if not sources_file:
        return "    tcp-request connection reject"
    if any(c in sources_file for c in " \t\n\"'#\\"):
        raise ValueError(f"cannot be written in haproxy.cfg: {sources_file!r}")
    return f"    tcp-request connection reject unless {{ src -f {sources_file} }}"


def _standby_listen(listen: Sequence[str], port: int, cluster: HaCluster) -> list[str]:
    """The read-only port (the managed service's ``replica-`` host): round-robin over the members
    whose ``GET /replica`` answers 200 (running standbys); when none does, the primary as a
    ``backup`` server, its health the ``primary`` section's check (``track``), so reads go on."""
    lines = ["listen standby"]
    lines += [f"    bind {address}:{port}" for address in listen]
    lines += [
        "    balance roundrobin",
        "    option httpchk GET /replica",
        "    http-check expect status 200",
        # A standby back up takes the reads over from the primary again.
        "    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions"
        " on-marked-up shutdown-backup-sessions",
    ]
    lines += [
        f"    server {m.name} {m.host}:{m.port}{_source(m)} check port {m.rest_port}" for m in cluster.members
    ]
    lines += [
        f"    server {m.name}-primary {m.host}:{m.port}{_source(m)} backup track primary/{m.name}"
        for m in cluster.members
    ]
    return lines


def haproxy_binds(listen_addresses: str) -> list[str]:
    """PostgreSQL's ``listen_addresses`` as HAProxy bind addresses (``*``: every IPv4 address)."""
    addresses = [a.strip() for a in listen_addresses.split(",") if a.strip()]
    binds = []
    for address in addresses or ["127.0.0.1"]:
        if address == "*":
            binds.append("0.0.0.0")
        elif ":" in address:
            binds.append(f"[{address}]")
        else:
            binds.append(address)
    return binds
