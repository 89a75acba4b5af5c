"""A cluster's floating address on this node while this node's member leads: the panel's own
follower of Patroni's leader key, in place of vip-manager (Debian 12's 1.0.2 reads etcd's v2 API
only, and Patroni writes the key with v3; docs/ha-operations.md, "A floating address").

    python -I vip_follow.py --config=PATH

One per member with a floating address, started by its node's agent as root (adding an address
needs CAP_NET_ADMIN), its output appended to its log. PATH is the JSON ``standbys/lib/vip.py`` renders
(root's, 0600: it holds the scope's etcd password). It imports nothing of Django or of the panel.

Every ``interval_ms`` it reads the leader key through etcd's v3 JSON gateway over TLS, as the
scope's user, a linearizable read (a member cut off from the quorum answers nothing, never an old
value), trying each endpoint in turn from the one that answered last. The key names this member:
the address goes on the interface (and one gratuitous ARP tells the neighbours); it names another,
or no one: the address comes off. etcd unreadable for ``retry`` rounds in a row, each at most
``timeout_ms`` of reading and ``interval_ms`` of waiting: the address comes off too (fail closed,
as vip-manager does: a node cut off from etcd must not keep it while another takes it). SIGTERM:
off, then exit. It logs what changes, not every read.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

IP = "/usr/sbin/ip"
# iputils-arping's (Debian's package "arping", another program, is /usr/sbin/arping with other options).
ARPING = "/usr/bin/arping"
COMMAND_TIMEOUT = 5.0
ARPING_TIMEOUT = 2.0  # on the way out: arping sends at once, then lingers a second
# How often the interface is looked at again while nothing changed (someone's `ip addr del`).
CHECK_EVERY_ROUNDS = 10
# etcd's words when a request lacks a token, carries an expired one, or one older than the last
# change of users and roles (standbys/engine/etcd.py's); and when a login is not needed.
TOKEN_REFUSED = ("user name is empty", "invalid auth token", "revision of auth store is old")
AUTH_DISABLED = "authentication is not enabled"


# --- what to do: pure --------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """``hold``: the address should be here (True), not here (False), as it is (None: etcd did
    not answer this round, not yet ``retry`` rounds in a row); ``failures``: those rounds."""

    hold: bool | None
    failures: int


def decide(
    readable: bool, value: str | None, member: str, holding: bool | None, failures: int, retry: int
) -> Decision:
    """One round: ``value`` the leader key's (None: no key, e.g. a stopped cluster or an
    election), ``readable`` whether any etcd member answered; ``holding`` and ``failures`` the
    previous round's decision."""
    if readable:
        return Decision(value == member, 0)
    failures += 1
    if failures >= retry:
        return Decision(False, failures)  # fail closed
    return Decision(holding, failures)


@dataclass(frozen=True)
class Config:
    endpoints: list[str]
    ca: str
    cert: str
    key: str
    user: str
    password: str
    trigger_key: str
    trigger_value: str
    ip: str
    prefix: int
    interface: str
    interval_ms: int
    timeout_ms: int
    retry: int

    @property
    def address(self) -> str:
        return f"{self.ip}/{self.prefix}"


def load(text: str) -> Config:
    """The configuration ``standbys/lib/vip.py`` rendered; a ValueError when a field is missing or of
    another type."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    values: dict[str, Any] = {}
    for name, kind in Config.__annotations__.items():
        value = data.get(name)
        wanted = {"list[str]": list, "str": str, "int": int}[kind]
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise ValueError(f"{name}: missing or not of type {kind}")
        values[name] = value
    config = Config(**values)
    if not config.endpoints or not all(isinstance(url, str) for url in config.endpoints):
        raise ValueError("endpoints: no etcd member")
    if config.interval_ms <= 0 or config.timeout_ms <= 0 or config.retry <= 0:
        raise ValueError("interval_ms, timeout_ms and retry must be positive")
    return config


def shows(ip_output: str, address: str) -> bool:
    """Whether ``ip -o -4 address show``'s lines have ``address`` (``IP/PREFIX``)."""
    return any(f" inet {address} " in f"{line} " for line in ip_output.splitlines())


# --- etcd ----------------------------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class Etcd:
    """The leader key read from the first member that answers, logged in as the scope's user
    (a token per member: etcd's simple tokens are known only to the member that gave them)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.tokens: dict[str, str] = {}
        self.first = 0  # the member to ask first: the one that answered last
        self.context: ssl.SSLContext | None = None

    def _context(self) -> ssl.SSLContext:
        if self.context is None:  # loaded again after a round that failed (a renewed certificate)
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.config.ca)
            context.load_cert_chain(self.config.cert, self.config.key)
            self.context = context
        return self.context

    def _post(self, url: str, path: str, body: dict[str, str], token: str, timeout: float) -> tuple[int, str]:
        parts = urlsplit(url)
        conn = http.client.HTTPSConnection(
            parts.hostname or "", parts.port or 2379, timeout=timeout, context=self._context()
        )
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = token
        try:
            conn.request("POST", path, json.dumps(body), headers)
            response = conn.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            conn.close()

    def _token(self, url: str, timeout: float) -> str:
        if url not in self.tokens:
            body = {"name": self.config.user, "password": self.config.password}
            status, text = self._post(url, "/v3/auth/authenticate", body, "", timeout)
            if status == 200:
                self.tokens[url] = str(json.loads(text).get("token", ""))
            elif AUTH_DISABLED in text:
                self.tokens[url] = ""
            else:
                raise OSError(f"login refused ({status}): {text.strip()[:200]}")
        return self.tokens[url]

    def _range(self, url: str, deadline: float) -> str | None:
        body = {"key": _b64(self.config.trigger_key)}
        for _attempt in range(2):  # a token refused: log in again, once
            token = self._token(url, _left(deadline)) if self.config.user else ""
            status, text = self._post(url, "/v3/kv/range", body, token, _left(deadline))
            if status == 200:
                kvs = json.loads(text).get("kvs") or []
                return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None
            self.tokens.pop(url, None)
            if not any(words in text for words in TOKEN_REFUSED):
                break
        raise OSError(f"refused ({status}): {text.strip()[:200]}")

    def read(self) -> tuple[bool, str | None, str]:
        """(whether a member answered, the key's value, why none did) within ``timeout_ms``."""
        deadline = time.monotonic() + self.config.timeout_ms / 1000
        urls = self.config.endpoints
        reasons = []
        for step in range(len(urls)):
            index = (self.first + step) % len(urls)
            if time.monotonic() >= deadline:
                reasons.append("no time left for the other members")
                break
            try:
                value = self._range(urls[index], deadline)
            except (OSError, ValueError, ssl.SSLError, http.client.HTTPException) as exc:
                reasons.append(f"{urls[index]}: {exc}")
                self.first = (index + 1) % len(urls)
                continue
            self.first = index
            return True, value, ""
        self.context = None
        return False, None, "; ".join(reasons)


def _left(deadline: float) -> float:
    return max(0.05, deadline - time.monotonic())


# --- the interface -------------------------------------------------------------------------------


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False, stdin=subprocess.DEVNULL
    )


def holds(config: Config) -> bool:
    result = _run([IP, "-o", "-4", "address", "show", "dev", config.interface])
    if result.returncode != 0:
        raise OSError(f"ip address show dev {config.interface}: {result.stderr.strip()}")
    return shows(result.stdout, config.address)


def bring_up(config: Config) -> subprocess.Popen[bytes] | None:
    """The address on the interface, then announced once with a gratuitous ARP (neighbours that
    knew the previous holder's hardware address learn this one's): arping, not waited for (it
    lingers a second after its one packet), reaped by ``Announcers``."""
    result = _run([IP, "-4", "address", "add", config.address, "dev", config.interface])
    if result.returncode != 0 and "File exists" not in result.stderr:
        raise OSError(f"ip address add {config.address} dev {config.interface}: {result.stderr.strip()}")
    if not os.path.exists(ARPING):
        log("no arping (package iputils-arping): no gratuitous ARP sent")
        return None
    return subprocess.Popen(
        [ARPING, "-U", "-c", "1", "-I", config.interface, config.ip],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Announcers:
    """The arpings under way, reaped every round (and waited for on the way out)."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def add(self, proc: subprocess.Popen[bytes] | None) -> None:
        if proc is not None:
            self.running.append(proc)

    def reap(self, timeout: float = 0) -> None:
        for proc in list(self.running):
            try:
                code = proc.wait(timeout) if timeout else proc.poll()
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code is None:
                continue
            self.running.remove(proc)
            if code != 0:
                log(f"arping failed (exit {code}): neighbours learn the address when their cache expires")


def take_down(config: Config) -> None:
    result = _run([IP, "-4", "address", "del", config.address, "dev", config.interface])
    if result.returncode != 0 and "Cannot assign requested address" not in result.stderr:
        raise OSError(f"ip address del {config.address} dev {config.interface}: {result.stderr.strip()}")


def apply(config: Config, hold: bool, announcers: Announcers) -> bool:
    """The interface made to agree with ``hold``; whether it changed anything."""
    if holds(config) == hold:
        return False
    if hold:
        announcers.add(bring_up(config))
    else:
        take_down(config)
    return True


# --- the loop ------------------------------------------------------------------------------------


class Stop(Exception):
    """SIGTERM or SIGINT."""


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} vip_follow[{os.getpid()}]: {message}", flush=True)


def _stop(_signum: int, _frame: object) -> None:
    raise Stop


def follow(config: Config, announcers: Announcers) -> None:
    """Rounds until SIGTERM (``Stop``)."""
    etcd = Etcd(config)
    holding: bool | None = None
    failures, rounds, applied = 0, 0, None
    seen: str | None = ""  # the leader key's value last logged ("": none yet)
    trouble = ""  # the interface's last error logged (a missing interface: once, not every round)
    while True:
        readable, value, why = etcd.read()
        if readable and (value != seen or failures):
            log(f"leader key: {value or '(none)'}" + (" (etcd answers again)" if failures else ""))
            seen = value
        elif not readable and failures == 0:
            log(f"etcd did not answer: {why}")
        decision = decide(readable, value, config.trigger_value, holding, failures, config.retry)
        if decision.failures == config.retry and failures < config.retry:
            log(f"etcd unreadable for {config.retry} rounds: the address comes off (fail closed)")
        holding, failures = decision.hold, decision.failures
        rounds += 1
        if holding is not None and (holding != applied or rounds % CHECK_EVERY_ROUNDS == 0):
            try:
                if apply(config, holding, announcers):
                    log(f"{config.address} {'added to' if holding else 'removed from'} {config.interface}")
                applied, trouble = holding, ""
            except (OSError, subprocess.TimeoutExpired) as exc:
                if str(exc) != trouble:
                    log(f"the interface: {exc}")
                applied, trouble = None, str(exc)
        announcers.reap()
        time.sleep(config.interval_ms / 1000)


def main(argv: list[str]) -> int:
    paths = [arg.removeprefix("--config=") for arg in argv if arg.startswith("--config=")]
    if len(paths) != 1:
        print("usage: vip_follow.py --config=PATH", file=sys.stderr)
        return 2
    try:
        with open(paths[0]) as handle:
            config = load(handle.read())
    except (OSError, ValueError) as exc:
        log(f"no configuration in {paths[0]}: {exc}")
        return 2
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log(f"following {config.trigger_key} for {config.trigger_value}: {config.address} on {config.interface}")
    announcers = Announcers()
    with contextlib.suppress(Stop):
        follow(config, announcers)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # taking the address off is not interrupted
    try:
        if apply(config, False, announcers):
            log(f"stopped: {config.address} removed from {config.interface}")
        else:
            log("stopped")
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"stopped, the address not removed: {exc}")
        return 1
    finally:
        announcers.reap(timeout=ARPING_TIMEOUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
