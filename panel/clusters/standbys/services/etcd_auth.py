"""Who may read and write what in the panel's etcd: one scope per cluster.

Every cluster's OS user holds a client certificate of the panel's etcd CA (its Patroni's), and
one that runs commands as that user (the server's own ``COPY … TO PROGRAM`` in a hostile hand)
could otherwise list every key and rewrite another cluster's ``/config``, whose
``archive_command`` that cluster's archiver runs as its own user. So etcd's authentication is
on: each cluster's Patroni logs in as a user named after its scope, whose role of the same name
reads and writes only the scope's prefix; the panel logs in as ``root``. The passwords are
derived from the panel's encryption key (``crypto.derived_secret``): every node's agent computes
the same ones, and one cluster's tells nothing of another's.

Turning authentication on is the last step, and only when every Patroni that runs logs in
already: a Patroni without a user would be refused from then on, lose the leader key and
demote its primary. A member's Patroni says which user it was given in its ``etcd_user`` tag,
which it publishes in its member key once it has read its configuration (start or reload); and
a Patroni that ran before gets its connections to etcd closed by a restart of every member
(``_started_since``), the clusters' Patroni in maintenance mode meanwhile where the restart
leaves etcd without a quorum (``_held_in_place``)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator

from panel import crypto
from panel.clusters.models import (
    Cluster,
    ClusterKind,
    ClusterStatus,
    EtcdMember,
    EtcdMemberState,
    Node,
    credentials,
)
from panel.clusters.standbys.engine import etcd as engine
from panel.clusters.standbys.engine import patroni
from panel.clusters.standbys.lib import etcd as etcd_lib
from panel.clusters.standbys.lib.patroni import ETCD_USER_TAG, NAMESPACE
from panel.clusters.standbys.services import etcd


def scope_password(scope: str) -> str:
    return crypto.derived_secret(f"etcd user {scope}")


def scope_tls(paths: etcd_lib.TlsPaths, scope: str) -> etcd_lib.TlsPaths:
    """``paths`` logged in as the scope's own user (named as the scope)."""
    return dataclasses.replace(paths, user=scope, password=scope_password(scope))


def ensure_scope(scope: str) -> bool:
    """The scope's user and role, made when missing (before its Patroni starts with them);
    whether anything was made. Nothing while no member of the panel's etcd serves."""
    urls = etcd.client_urls()
    if not urls:
        return False
    tls = etcd.client_files()
    prefix = etcd_lib.scope_prefix(NAMESPACE, scope)
    made = engine.ensure_prefix_role(urls, scope, prefix, tls)
    return engine.ensure_user(urls, scope, scope_password(scope), scope, tls) or made


def forget_scope(scope: str) -> None:
    """A deleted cluster's user and role."""
    urls = etcd.client_urls()
    if urls:
        engine.delete_user(urls, scope, etcd.client_files())


def _members(urls: list[str], tls: etcd_lib.TlsPaths) -> tuple[list[str], int]:
    """The members (``scope/name``) whose Patroni runs (its member key is there) without the
    user of its scope, and how many run at all."""
    waiting, running = [], 0
    for key, value in engine.keys(urls, NAMESPACE, tls):
        parts = key[len(NAMESPACE) :].split("/")
        if len(parts) != 3 or parts[1] != "members":
            continue
        running += 1
        try:
            tags = json.loads(value).get("tags") or {}
        except (ValueError, AttributeError):
            tags = {}
        if tags.get(ETCD_USER_TAG) != parts[0]:
            waiting.append(f"{parts[0]}/{parts[2]}")
    return waiting, running


def enable_when_ready(node: Node, timeout: float) -> str | None:
    """etcd's authentication on, once ``root`` exists, every running Patroni logs in as its own
    user, and every member started since (``_started_since``); a note when it was turned on, or
    what it waits for."""
    urls = etcd.client_urls()
    if not urls:
        return None
    tls = etcd.client_files()
    if engine.auth_enabled(urls, tls):
        return None
    engine.ensure_user(urls, etcd_lib.ROOT, tls.password, etcd_lib.ROOT, tls)
    waiting, running = _members(urls, tls)
    if waiting:
        return f"etcd: authentication waits for the Patroni of {', '.join(sorted(waiting))} to log in"
    if running and (note := _started_since(node, urls, tls, timeout)):
        return note
    engine.enable_auth(urls, tls)
    engine.delete_prefix(urls, RESTARTED, tls)
    for cluster in _standby_clusters():  # one an agent that stopped mid-restart left paused
        _resume(cluster, timeout)
    return "etcd: authentication enabled (each cluster's Patroni logs in as its own user)"


# When every Patroni was seen logging in (epoch seconds): each member starts again after it.
RESTARTED = "/pgpanel-etcd/restart-before-auth"


def _started_since(node: Node, urls: list[str], tls: etcd_lib.TlsPaths, timeout: float) -> str | None:
    """Every member of the panel's etcd started again since every running Patroni has its user;
    None once they have, else what waits. A Patroni that ran before got, with its user, a client
    certificate without a common name (``etcd_lib.client_subject``), but it keeps the connections
    it opened with the one of before, which the JSON gateway refuses once authentication is on:
    a member's restart closes them. The first agent to see every Patroni ready notes the time in
    etcd; each agent restarts its own member (a few seconds without it, well inside Patroni's
    ``retry_timeout``), and the one that finds them all started since turns authentication on."""
    engine.put_absent(urls, RESTARTED, repr(time.time()), tls)
    since = float(engine.get(urls, RESTARTED, tls) or 0)
    own = EtcdMember.objects.filter(node=node, state=EtcdMemberState.RUNNING).first()

    def url(row: EtcdMember) -> str:
        mine = own is not None and row.pk == own.pk
        return f"https://127.0.0.1:{row.client_port}" if mine else etcd.peer_of_row(row).client_url

    if own is not None and (engine.started_at(url(own), tls) or since + 1) <= since:
        serving = len(etcd.serving())
        with _held_in_place(timeout, quorum_lost=serving - 1 < serving // 2 + 1):
            engine.stop(etcd.data_dir())
            etcd.ensure_here(node, timeout)
    stale = [row.name for row in etcd.serving() if (engine.started_at(url(row), tls) or 0) <= since]
    if stale:
        return f"etcd: authentication waits for the etcd of {', '.join(stale)} to start again"
    return None


# --- the primaries kept while etcd restarts ---------------------------------------------------------


@contextlib.contextmanager
def _held_in_place(timeout: float, *, quorum_lost: bool) -> Iterator[None]:
    """Every standby cluster's Patroni in maintenance mode (``pause``) while this member restarts,
    when that leaves etcd without a quorum (one or two members). Without etcd a primary's Patroni
    demotes it once ``retry_timeout`` (5 s) passes, and a restart can take longer on a loaded
    machine (a full run saw the primary's PostgreSQL restarted); a paused Patroni leaves
    PostgreSQL as it is. Resumed afterwards whatever happened (and by ``enable_when_ready``, for
    an agent that stopped in between)."""
    if not quorum_lost:
        yield
        return
    held = [cluster for cluster in _standby_clusters() if _pause(cluster, True)]
    try:
        deadline = time.monotonic() + timeout
        for cluster in held:
            while not _paused(cluster) and time.monotonic() < deadline:
                time.sleep(0.2)
        yield
    finally:
        for cluster in held:
            _resume(cluster, timeout)


def _standby_clusters() -> list[Cluster]:
    """The clusters whose Patroni use the panel's etcd, on every node."""
    return list(
        Cluster.objects.filter(kind=ClusterKind.LOCAL, num_nodes__gt=1, status__in=ClusterStatus.SERVING)
    )


def _pause(cluster: Cluster, pause: bool) -> bool:
    """Patroni's ``pause`` set in the cluster's ``/config`` through any member that answers."""
    auth = credentials.rest_credentials(cluster)
    for member in cluster.members.all():
        body = {"pause": pause}
        status, _ = patroni.rest(
            "PATCH", member.rest_port, "/config", body, timeout=10, host=member.host, auth=auth
        )
        if status == 200:
            return True
    return False


def _paused(cluster: Cluster) -> bool:
    """Every member whose Patroni answers has read the pause (it takes it in its next loop)."""
    for member in cluster.members.all():
        status, text = patroni.rest("GET", member.rest_port, "/patroni", timeout=3, host=member.host)
        if status == 200 and not json.loads(text).get("pause"):
            return False
    return True


def _resume(cluster: Cluster, timeout: float) -> None:
    """The pause lifted once etcd takes writes again; a cluster not paused is left as it is."""
    deadline = time.monotonic() + timeout
    while True:
        config = _config(cluster)
        if config is not None and not config.get("pause"):
            return
        if (config is not None and _pause(cluster, False)) or time.monotonic() > deadline:
            return
        time.sleep(0.5)


def _config(cluster: Cluster) -> dict[str, object] | None:
    """The cluster's ``/config`` as the first member that answers reads it from etcd."""
    for member in cluster.members.all():
        status, text = patroni.rest("GET", member.rest_port, "/config", timeout=3, host=member.host)
        if status == 200:
            found = json.loads(text)
            return found if isinstance(found, dict) else None
    return None
