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

from panel.clusters.standbys.engine.patroni import _detach, _processes_with, _terminate
from panel.clusters.standbys.lib import etcd as etcd_lib
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


def _send(
    url: str, path: str, body: Any, tls: etcd_lib.TlsPaths, token: str, timeout: float
) -> tuple[int, str]:
    parts = urlsplit(url)
    conn = http.client.HTTPSConnection(
        parts.hostname or "", parts.port or 2379, timeout=timeout, context=_context(tls)
    )
    headers = {"Authorization": token} if token else None
    return jsonhttp.exchange(conn, "GET" if body is None else "POST", path, body, headers=headers)


# The token each (member, user) got last: etcd's simple tokens are known only to the member
# that issued them and last five minutes; a request refused for its token logs in again.
_tokens: dict[tuple[str, str], str] = {}
# etcd's words when a request lacks a token, carries an expired one, or one older than the last
# change of users and roles.
TOKEN_REFUSED = ("user name is empty", "invalid auth token", "revision of auth store is old")
AUTH_DISABLED = "authentication is not enabled"


def _login(url: str, tls: etcd_lib.TlsPaths, timeout: float) -> tuple[int, str]:
    """(200, token) or (200, "") while etcd's authentication is off; else (status, reason)."""
    body = {"name": tls.user, "password": tls.password}
    status, text = _send(url, "/v3/auth/authenticate", body, tls, "", timeout)
    if status == 200:
        return 200, str(json.loads(text).get("token", ""))
    if AUTH_DISABLED in text:
        return 200, ""
    return status, text


def request(
    url: str, path: str, body: Any, tls: etcd_lib.TlsPaths, *, timeout: float = TIMEOUT
) -> tuple[int, str]:
    """One request to the member at ``url`` (``https://host:port``), logged in as ``tls.user``
    when it names one; (0, reason) when nothing answers or the TLS handshake fails. ``body``
    None: a GET."""
    if not tls.user:
        return _send(url, path, body, tls, "", timeout)
    key = (url, tls.user)
    for fresh in (key not in _tokens, True):
        if fresh:
            status, token = _login(url, tls, timeout)
            if status != 200:
                return status, token
            _tokens[key] = token
        token = _tokens[key]
        status, text = _send(url, path, body, tls, token, timeout)
        # No token because authentication was off when it last logged in: it may be on now.
        if status == 200 or (token and not any(words in text for words in TOKEN_REFUSED)):
            break
    return status, text


def healthy(url: str, tls: etcd_lib.TlsPaths) -> bool:
    status, text = _send(url, "/health", None, tls, "", TIMEOUT)  # etcd asks no user here
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
    """The id (hex) of the member that leads now, as the first member that answers sees it; an
    EngineError while it knows none (during an election its status has no ``leader``)."""
    data = call(urls, "/v3/maintenance/status", {}, tls)
    if not int(data.get("leader") or 0):
        raise EngineError("the etcd member that answered knows no leader now (an election)")
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
    end = etcd_lib.prefix_end(prefix)
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
    end = etcd_lib.prefix_end(prefix)
    call(urls, "/v3/kv/deleterange", {"key": _b64(prefix), "range_end": _b64(end)}, tls)


def keys(urls: Sequence[str], prefix: str, tls: etcd_lib.TlsPaths) -> list[tuple[str, str]]:
    """(key, value) of every key under ``prefix``."""
    body = {"key": _b64(prefix), "range_end": _b64(etcd_lib.prefix_end(prefix))}
    data = call(urls, "/v3/kv/range", body, tls)
    return [
        (base64.b64decode(kv["key"]).decode(), base64.b64decode(kv.get("value", "")).decode())
        for kv in data.get("kvs") or []
    ]


# --- users and roles (etcd's authentication) -------------------------------------------------------


def auth_enabled(urls: Sequence[str], tls: etcd_lib.TlsPaths) -> bool:
    """Whether etcd asks for a user, as the first member that answers says (etcd 3.4 has no
    status call: a login says "authentication is not enabled" while it is off)."""
    reasons = []
    for url in urls:
        status, text = _login(url, tls, TIMEOUT)
        if status == 200:
            return bool(text)
        reasons.append(f"{url}: {text.strip()[:200] or status}")
        if status != 0:
            break
    raise EngineError("etcd refused the panel's login or did not answer: " + "; ".join(reasons))


def _absent(urls: Sequence[str], path: str, body: dict[str, str], tls: etcd_lib.TlsPaths) -> bool:
    try:
        call(urls, path, body, tls)
    except EngineError as exc:
        if "not found" in str(exc):
            return True
        raise
    return False


def ensure_user(urls: Sequence[str], name: str, password: str, role: str, tls: etcd_lib.TlsPaths) -> bool:
    """User ``name`` with ``password`` holding ``role``, made when missing (a user that exists
    keeps its password: every change of users and roles voids every token given so far). Whether
    anything was made."""
    made = False
    if _absent(urls, "/v3/auth/user/get", {"name": name}, tls):
        call(urls, "/v3/auth/user/add", {"name": name, "password": password}, tls)
        made = True
    roles = call(urls, "/v3/auth/user/get", {"name": name}, tls).get("roles") or []
    if role not in roles:
        call(urls, "/v3/auth/user/grant", {"user": name, "role": role}, tls)
        made = True
    return made


def ensure_prefix_role(urls: Sequence[str], role: str, prefix: str, tls: etcd_lib.TlsPaths) -> bool:
    """Role ``role`` that reads and writes every key under ``prefix`` and nothing else, made
    when missing. Whether anything was made."""
    made = False
    if _absent(urls, "/v3/auth/role/get", {"role": role}, tls):
        call(urls, "/v3/auth/role/add", {"name": role}, tls)
        made = True
    key, end = _b64(prefix), _b64(etcd_lib.prefix_end(prefix))
    perms = call(urls, "/v3/auth/role/get", {"role": role}, tls).get("perm") or []
    wanted = {"permType": "READWRITE", "key": key, "range_end": end}
    if not any({k: p.get(k, "READ" if k == "permType" else "") for k in wanted} == wanted for p in perms):
        call(urls, "/v3/auth/role/grant", {"name": role, "perm": wanted}, tls)
        made = True
    return made


def delete_user(urls: Sequence[str], name: str, tls: etcd_lib.TlsPaths) -> None:
    """User and role ``name`` gone (a deleted cluster's), if they exist."""
    for path, body in (("/v3/auth/user/delete", {"name": name}), ("/v3/auth/role/delete", {"role": name})):
        _absent(urls, path, body, tls)


def enable_auth(urls: Sequence[str], tls: etcd_lib.TlsPaths) -> None:
    call(urls, "/v3/auth/enable", {}, tls)


def started_at(url: str, tls: etcd_lib.TlsPaths) -> float | None:
    """When the member at ``url`` started (its ``process_start_time_seconds``, epoch seconds);
    None when it does not answer."""
    status, text = _send(url, "/metrics", None, tls, "", TIMEOUT)
    if status != 200:
        return None
    for line in text.splitlines():
        if line.startswith("process_start_time_seconds "):
            return float(line.split()[1])
    return None
