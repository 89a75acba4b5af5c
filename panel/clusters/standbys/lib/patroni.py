"""Patroni for a cluster with standbys: each member's Patroni configuration, the dynamic settings
kept in etcd (``/config``), and Patroni's ``/cluster`` answer read into member states (HAProxy's
configuration is ``standbys/lib/haproxy.py``). Pure: text and dataclasses in and out.

Patroni reads YAML, of which JSON is a subset: the configuration is written as JSON.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from panel.clusters.standbys.lib import etcd as etcd_lib

# DESIGN §7: fail over at once when the primary's postmaster dies (not restart it in place),
# check every second, hold the leader key 20 s (Patroni's minimum), standbys retry the WAL
# source every 500 ms.
TTL = 20
LOOP_WAIT = 1
RETRY_TIMEOUT = 5
WAL_RETRIEVE_RETRY_INTERVAL = "500ms"
# An acknowledged commit is on a standby, applied: none is lost when the primary goes, and a read
# on the standby port after it sees it (test_ha_standby_reads). Flush ("on") would be enough for
# zero loss; after a switchover the commits no longer wait for a standby to reconnect (the third
# member cascades from the candidate), so replaying costs milliseconds, not seconds.
SYNCHRONOUS_COMMIT = "remote_apply"
WAL_KEEP_SIZE = "256MB"
NAMESPACE = "/pgpanel/"
# The member's tag naming the etcd user its Patroni was given: published in its member key once
# Patroni read its configuration, it tells the panel that Patroni logs in (standbys/services/etcd_auth.py).
ETCD_USER_TAG = "etcd_user"


def new_rest_username() -> str:
    """A cluster's Patroni REST user (its password: ``crypto.new_encrypted_secret``)."""
    return f"panel-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Member:
    """One member as its Patroni is configured: name, PostgreSQL port, REST port, data directory."""

    name: str
    port: int
    rest_port: int
    data_dir: str
    host: str = "127.0.0.1"
    # Patroni's replicatefrom tag: the member this one streams from (a switchover's cascade).
    replicate_from: str | None = None


@dataclass(frozen=True)
class HaCluster:
    """What every member's configuration shares."""

    scope: str
    etcd_hosts: tuple[str, ...]
    bin_dir: str
    socket_dir: str
    superuser: str  # Patroni's local login, over the socket by peer authentication: no password
    replication_user: str  # its replication and rewind login between members, a role of its own
    replication_password: str
    max_connections: int
    members: tuple[Member, ...]
    # Included by every member's postgresql.conf: the panel's settings (guard, TLS, plan, owner).
    panel_conf: str
    hba_file: str
    ident_file: str
    # The command Patroni runs on a role change (it appends action, role and scope).
    on_role_change: str
    host: str = "127.0.0.1"
    # The command Patroni runs right before it stops a member's PostgreSQL (a switchover's hold).
    before_stop: str = ""
    # HAProxy's pattern file of trusted sources (``render_haproxy``; none: nobody is let in).
    haproxy_sources: str = ""
    # pgBackRest on the cluster's stanza up to the action (program, --config, --stanza): new
    # standbys are restored from the repository, and replay what they lack from its archive.
    # Empty: no repository, standbys are copied from the primary only.
    repository: tuple[str, ...] = ()
    # Patroni's REST API: every unsafe request (switchover, PATCH /config, restart, reinitialize,
    # reload) must carry this user and password; GET (HAProxy's checks, /cluster) stays open.
    rest_username: str = ""
    rest_password: str = ""
    # The cluster's copy of its node's etcd client certificate (the panel's etcd CA's): Patroni
    # reaches every member over TLS with it. None: plain HTTP (a test's own etcd).
    etcd_tls: etcd_lib.TlsPaths | None = None
    # The members' role's client certificate and key (``lib.member_tls``): the members' lines
    # for other nodes' addresses ask for it. Empty: none sent.
    member_sslcert: str = ""
    member_sslkey: str = ""
    # The members' ssl_ca_file: the cluster's CA and the member CA, one file per node outside
    # the data directories (a copy of one from before the member CA would not know it).
    member_ssl_ca: str = ""

    @property
    def strict(self) -> bool:
        """Strict synchronous mode only with three members: a two-member cluster must keep
        writing when its standby is gone (DESIGN §7)."""
        return len(self.members) >= 3


def dynamic_config(cluster: HaCluster) -> dict[str, Any]:
    """The cluster-wide settings Patroni keeps in etcd: bootstrap and ``PATCH /config`` alike."""
    return {
        "ttl": TTL,
        "loop_wait": LOOP_WAIT,
        "retry_timeout": RETRY_TIMEOUT,
        "primary_start_timeout": 0,
        "synchronous_mode": True,
        "synchronous_mode_strict": cluster.strict,
        "postgresql": {
            "use_pg_rewind": True,
            "use_slots": True,
            "parameters": {
                "max_connections": cluster.max_connections,
                "synchronous_commit": SYNCHRONOUS_COMMIT,
                "wal_retrieve_retry_interval": WAL_RETRIEVE_RETRY_INTERVAL,
                "wal_keep_size": WAL_KEEP_SIZE,
                "hot_standby": "on",
                "wal_log_hints": "on",
            },
        },
    }


# Patroni's own rule for a slot's name (and PostgreSQL's): lower-case letters, digits, "_".
SLOT_NAME = re.compile(r"[a-z0-9_]{1,63}")


def permanent_slots(declare: Sequence[str] = (), remove: Sequence[str] = ()) -> dict[str, Any]:
    """A ``PATCH /config`` body for Patroni's permanent slots: a physical slot of each name in
    ``declare`` on whichever member is primary (Patroni keeps copies on the standbys, advanced
    to the primary's position, so a failover keeps the slot), and none of those in ``remove``
    (``null`` deletes a key from the dynamic configuration)."""
    slots: dict[str, Any] = {}
    for name in (*declare, *remove):
        if not SLOT_NAME.fullmatch(name):
            raise ValueError(f"not a replication slot name: {name!r}")
    slots.update({name: {"type": "physical"} for name in declare})
    slots.update(dict.fromkeys(remove))
    return {"slots": slots}


def member_config(cluster: HaCluster, member: Member, pgpass: str) -> dict[str, Any]:
    """One member's Patroni configuration."""
    auth = {"username": cluster.replication_user, "password": cluster.replication_password}
    if cluster.member_sslcert:
        auth.update(sslcert=cluster.member_sslcert, sslkey=cluster.member_sslkey)
    tags = {"replicatefrom": member.replicate_from} if member.replicate_from else {}
    if cluster.etcd_tls is not None and cluster.etcd_tls.user:
        tags[ETCD_USER_TAG] = cluster.etcd_tls.user
    return {
        "tags": tags,
        "scope": cluster.scope,
        "namespace": NAMESPACE,
        "name": member.name,
        "restapi": {
            "listen": f"{member.host}:{member.rest_port}",
            "connect_address": f"{member.host}:{member.rest_port}",
            **rest_authentication(cluster),
        },
        "etcd3": etcd3_section(cluster),
        "bootstrap": {"dcs": dynamic_config(cluster)},
        "postgresql": {
            "listen": f"{member.host}:{member.port}",
            "connect_address": f"{member.host}:{member.port}",
            "data_dir": member.data_dir,
            "bin_dir": cluster.bin_dir,
            "pgpass": pgpass,
            "custom_conf": cluster.panel_conf,
            "parameters": {
                "unix_socket_directories": cluster.socket_dir,
                "hba_file": cluster.hba_file,
                "ident_file": cluster.ident_file,
                **({"ssl_ca_file": cluster.member_ssl_ca} if cluster.member_ssl_ca else {}),
            },
            "use_unix_socket": True,
            "authentication": {
                "superuser": {"username": cluster.superuser},
                "replication": auth,
                "rewind": auth,
            },
            "callbacks": {"on_role_change": cluster.on_role_change},
            **({"before_stop": cluster.before_stop} if cluster.before_stop else {}),
            "basebackup": [{"checkpoint": "fast"}],
            "remove_data_directory_on_rewind_failure": True,
            "remove_data_directory_on_diverged_timelines": True,
            **create_replica_methods(cluster, member),
        },
    }


def rest_authentication(cluster: HaCluster) -> dict[str, Any]:
    """``restapi.authentication``: without it anyone who reaches a member's REST port (its node's
    address once members are spread) could switch over, restart, or PATCH /config with an
    ``archive_command`` that runs as the cluster's OS user. Patroni also sends it to the other
    members on its own requests."""
    if not cluster.rest_username or not cluster.rest_password:
        raise ValueError("a member's Patroni REST API needs a user and a password")
    if ":" in cluster.rest_username:
        raise ValueError(f"not a REST user name: {cluster.rest_username!r}")
    return {"authentication": {"username": cluster.rest_username, "password": cluster.rest_password}}


def etcd3_section(cluster: HaCluster) -> dict[str, Any]:
    """Patroni's ``etcd3``: every member of the panel's etcd, over TLS when the cluster has its
    client certificate."""
    if cluster.etcd_tls is None:
        return {"hosts": list(cluster.etcd_hosts)}
    return etcd_lib.patroni_section(cluster.etcd_hosts, cluster.etcd_tls)


def create_replica_methods(cluster: HaCluster, member: Member) -> dict[str, Any]:
    """How Patroni makes this member a standby: from the pgBackRest repository when the cluster
    has one (its primary is not read at all; what the backup lacks comes from the archive and
    then streaming), else, and whenever that fails (no backup yet), with pg_basebackup from the
    primary. The restore goes to the member's own data directory (``--pg1-path``)."""
    if not cluster.repository:
        return {"create_replica_methods": ["basebackup"]}
    restore = [*cluster.repository, f"--pg1-path={member.data_dir}", "--delta", "restore"]
    archive_get = [*cluster.repository, f"--pg1-path={member.data_dir}", "archive-get", "%f", "%p"]
    return {
        "create_replica_methods": ["pgbackrest", "basebackup"],
        # no_params: Patroni would append --scope, --datadir … which pgBackRest refuses;
        # keep_data: the directory the member was given stays (Patroni empties it on failure).
        "pgbackrest": {"command": shlex.join(restore), "keep_data": True, "no_params": True},
        "recovery_conf": {"restore_command": shlex.join(archive_get)},
    }


def render_member(cluster: HaCluster, member: Member, pgpass: str) -> str:
    return json.dumps(member_config(cluster, member, pgpass), indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class MemberStatus:
    """A member as Patroni's ``GET /cluster`` describes it."""

    name: str
    role: str  # primary | standby
    state: str
    port: int | None
    timeline: int | None
    lag_bytes: int | None
    sync: bool = False  # the synchronous standby (commits wait for it)

    @property
    def is_primary(self) -> bool:
        return self.role == "primary"


@dataclass(frozen=True)
class MemberInfo:
    """A member as ``cluster members`` and the Overview show it."""

    name: str
    role: str  # primary | standby | unknown
    node: str
    port: int
    pid: int | None
    state: str
    lag_bytes: int | None
    timeline: int | None


PRIMARY_ROLES = frozenset({"leader", "standby_leader", "master", "primary"})


def parse_cluster(text: str) -> list[MemberStatus]:
    """Patroni's ``GET /cluster`` JSON: its members, the leader as ``primary``. A standby's lag is
    a number of bytes, or absent/"unknown" when Patroni cannot tell."""
    data = json.loads(text)
    statuses = []
    for item in data.get("members", []):
        # Bytes not yet replayed (what a promotion would wait for), else Patroni's own figure.
        lag = item.get("replay_lag", item.get("lag"))
        statuses.append(
            MemberStatus(
                name=str(item.get("name", "")),
                role="primary" if item.get("role") in PRIMARY_ROLES else "standby",
                state=str(item.get("state", "")),
                port=int(item["port"]) if isinstance(item.get("port"), int) else None,
                timeline=int(item["timeline"]) if isinstance(item.get("timeline"), int) else None,
                lag_bytes=lag if isinstance(lag, int) else (0 if item.get("role") in PRIMARY_ROLES else None),
                sync=item.get("role") == "sync_standby",
            )
        )
    return sorted(statuses, key=lambda s: s.name)
