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
(``_started_since``)."""

from __future__ import annotations

import dataclasses
import json
import time

from panel import crypto
from panel.clusters.models import EtcdMember, EtcdMemberState, Node
from panel.clusters.standbys.engine import etcd as engine
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
        engine.stop(etcd.data_dir())
        etcd.ensure_here(node, timeout)
    stale = [row.name for row in etcd.serving() if (engine.started_at(url(row), tls) or 0) <= since]
    if stale:
        return f"etcd: authentication waits for the etcd of {', '.join(stale)} to start again"
    return None
