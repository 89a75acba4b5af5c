"""The panel's etcd on this node: the only module that spawns or signals etcd and talks to it
(its v3 JSON gateway over TLS, with a client certificate the panel's etcd CA signed).

etcd runs as the panel's runner user, detached (``setsid --fork``), found again by its data
directory on its command line. Its argument list is ``lib.etcd.member_argv``.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil

from panel.clusters.engine.patroni import _detach, _processes_with, _terminate
from panel.clusters.lib import etcd as etcd_lib
from panel.core import jsonhttp
from panel.core.polling import wait_for
from panel.core.runas import EngineError, OsUser

ETCD = "/usr/bin/etcd"
TIMEOUT = 3.0


def _process(data_dir: Path) -> psutil.Process | None:
    procs = _processes_with(f"--data-dir={data_dir}")
    return procs[0] if procs else None


def running_argv(data_dir: Path) -> list[str] | None:
    """The command line of the etcd of ``data_dir`` (None: not running)."""
    proc = _process(data_dir)
    if proc is None:
        return None
    try:
        return list(proc.cmdline())
    except psutil.Error:
        return None


def pid(data_dir: Path) -> int | None:
    proc = _process(data_dir)
    return proc.pid if proc else None


def start(argv: Sequence[str], log_file: Path, user: OsUser) -> None:
    if not Path(argv[0]).exists():
        raise EngineError("High availability needs etcd: install the etcd-server package.")
    _detach(user, list(argv), log_file)


def stop(data_dir: Path, *, timeout: float = 10) -> None:
    _terminate(_processes_with(f"--data-dir={data_dir}"), timeout)


def kill(data_dir: Path) -> None:
    """SIGKILL (tests: a member's machine lost)."""
    for proc in _processes_with(f"--data-dir={data_dir}"):
        try:
            proc.kill()
        except psutil.Error:
            continue


# --- the client ------------------------------------------------------------------------------------


def _context(tls: etcd_lib.TlsPaths) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca)
    context.load_cert_chain(tls.cert, tls.key)
    return context


def request(
    url: str, path: str, body: Any, tls: etcd_lib.TlsPaths, *, timeout: float = TIMEOUT
) -> tuple[int, str]:
    """One request to the member at ``url`` (``https://host:port``); (0, reason) when nothing
    answers or the TLS handshake fails. ``body`` None: a GET."""
    parts = urlsplit(url)
    conn = http.client.HTTPSConnection(
        parts.hostname or "", parts.port or 2379, timeout=timeout, context=_context(tls)
    )
    return jsonhttp.exchange(conn, "GET" if body is None else "POST", path, body)


def healthy(url: str, tls: etcd_lib.TlsPaths) -> bool:
    status, text = request(url, "/health", None, tls)
    if status != 200:
        return False
    try:
        return json.loads(text).get("health") == "true"
    except ValueError:
        return False


def wait_healthy(url: str, tls: etcd_lib.TlsPaths, timeout: float) -> bool:
    return wait_for(lambda: healthy(url, tls), timeout, interval=0.2)


def call(
    urls: Sequence[str], path: str, body: Any, tls: etcd_lib.TlsPaths, *, timeout: float = TIMEOUT
) -> dict[str, Any]:
    """``path`` on the first member of ``urls`` that answers; etcd's refusal or no answer at
    all: an EngineError with its words."""
    reasons = []
    for url in urls:
        status, text = request(url, path, body, tls, timeout=timeout)
        if status == 200:
            return dict(json.loads(text))
        reasons.append(f"{url}: {text.strip()[:200] or status}")
        if status != 0:  # a member answered: another would say the same
            break
    raise EngineError("etcd refused or did not answer: " + "; ".join(reasons))


def members(urls: Sequence[str], tls: etcd_lib.TlsPaths) -> list[etcd_lib.EtcdMember]:
    data = call(urls, "/v3/cluster/member/list", {}, tls)
    return etcd_lib.parse_members(json.dumps(data))


def leader(urls: Sequence[str], tls: etcd_lib.TlsPaths) -> str:
    """The id (hex) of the member that leads now, as the first member that answers sees it."""
    data = call(urls, "/v3/maintenance/status", {}, tls)
    return f"{int(data['leader']):x}"


def add_learner(urls: Sequence[str], peer_url: str, tls: etcd_lib.TlsPaths) -> str:
    """``member add --learner``: a member that does not vote (the quorum is unchanged) until it
    caught up and is promoted. Its id (hex)."""
    data = call(urls, "/v3/cluster/member/add", {"peerURLs": [peer_url], "isLearner": True}, tls)
    return f"{int(data['member']['ID']):x}"


def promote(urls: Sequence[str], member_id: str, tls: etcd_lib.TlsPaths) -> None:
    call(urls, "/v3/cluster/member/promote", {"ID": etcd_lib.member_id_field(member_id)}, tls)


def wait_for_promotion(urls: Sequence[str], member_id: str, tls: etcd_lib.TlsPaths, timeout: float) -> bool:
    """Promote the learner once it caught up with the leader (etcd refuses before); True when it
    votes (a learner promoted before counts: a retry after a crash)."""

    def promoted() -> bool:
        try:
            promote(urls, member_id, tls)
        except EngineError as exc:
            return "not a learner" in str(exc)
        return True

    return wait_for(promoted, timeout, interval=1.0)


# Removing the leader waits for the change to commit and for the next leader.
MEMBERSHIP_TIMEOUT = 15.0


def remove(urls: Sequence[str], member_id: str, tls: etcd_lib.TlsPaths) -> None:
    body = {"ID": etcd_lib.member_id_field(member_id)}
    call(urls, "/v3/cluster/member/remove", body, tls, timeout=MEMBERSHIP_TIMEOUT)


def update_peer(urls: Sequence[str], member_id: str, peer_url: str, tls: etcd_lib.TlsPaths) -> None:
    body = {"ID": etcd_lib.member_id_field(member_id), "peerURLs": [peer_url]}
    call(urls, "/v3/cluster/member/update", body, tls)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def put(urls: Sequence[str], key: str, value: str, tls: etcd_lib.TlsPaths) -> None:
    call(urls, "/v3/kv/put", {"key": _b64(key), "value": _b64(value)}, tls)


def get(urls: Sequence[str], key: str, tls: etcd_lib.TlsPaths) -> str | None:
    data = call(urls, "/v3/kv/range", {"key": _b64(key)}, tls)
    kvs = data.get("kvs") or []
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def put_absent(urls: Sequence[str], key: str, value: str, tls: etcd_lib.TlsPaths) -> bool:
    """``key`` written only when it does not exist yet (a transaction on its create revision);
    whether it was."""
    compare = [{"key": _b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": 0}]
    success = [{"request_put": {"key": _b64(key), "value": _b64(value)}}]
    data = call(urls, "/v3/kv/txn", {"compare": compare, "success": success}, tls)
    return bool(data.get("succeeded"))


def legacy_keys(port: int, prefix: str) -> list[tuple[str, str, bool]]:
    """(key, value, whether it has a lease) of every key under ``prefix`` in an etcd of an older
    panel (plain HTTP on loopback, no authentication: it is about to be put aside)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    body = {"key": _b64(prefix), "range_end": _b64(end)}
    status, text = jsonhttp.exchange(conn, "POST", "/v3/kv/range", body)
    if status == 0:
        raise EngineError(f"The etcd of before on port {port} did not answer: {text}")
    if status != 200:
        raise EngineError(f"The etcd of before on port {port} refused to list its keys: {text[:200]}")
    return [
        (
            base64.b64decode(kv["key"]).decode(),
            base64.b64decode(kv.get("value", "")).decode(),
            int(kv.get("lease", 0)) != 0,
        )
        for kv in json.loads(text).get("kvs") or []
    ]


def delete_prefix(urls: Sequence[str], prefix: str, tls: etcd_lib.TlsPaths) -> None:
    """Every key under ``prefix`` (``range_end`` is the prefix + 1)."""
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    call(urls, "/v3/kv/deleterange", {"key": _b64(prefix), "range_end": _b64(end)}, tls)
