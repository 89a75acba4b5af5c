"""The key and certificate every panel process signs and verifies Celery messages with, and what
the signature covers.

Celery's ``auth`` serializer (issue 29) signs a message's body: its arguments. The workers and
node agents, which run as root, take only bodies signed by this key, so a task written onto the
broker by anyone else (the broker's password is not enough) is refused before it is decoded. The
headers beside the body (the task's name, its id, expiry, ETA and retry count) and the queue it
was sent to are not signed by it, so ``seal`` copies them into the body before it is signed, and
``refusal`` (run by every task before its body, panel/celery.py) refuses a message whose headers
differ from the signed copy, that was signed for a queue the worker does not consume (another
node's), whose signed expiry has passed (or, without one, that is older than ``MAX_AGE``), or whose
id and retry count already ran (the replay window, kept in Redis as long as the message could
otherwise run). A retry is the same id with the next retry count, both signed: it runs; the same
message pushed again does not (issue 37).

Generated on first start next to the panel's other keys (``keys/``, 0600; readable by the web
user's group under ``make run``, which must sign the calls it sends), never in the database. A
panel on several machines copies both files to every node (or names them with
``PANEL_TASK_SIGNING_KEY`` and ``PANEL_TASK_SIGNING_CERT``), as it shares the other keys.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

KEY_FILE = "celery_signing.key"
CERT_FILE = "celery_signing.crt"
LOCK_FILE = "celery_signing.lock"
# Celery refuses an expired certificate: this one outlives the installation.
VALID_DAYS = 100 * 365


def _new_pair() -> tuple[bytes, bytes]:
    """A new RSA key (Celery's auth serializer signs with RSA only) and its self-signed certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pgpanel task signing")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temporary, path)


def configured(value: str, keys_dir: Path, name: str) -> str:
    """A ``PANEL_TASK_SIGNING_KEY``/``_CERT`` value as the path Celery reads: a path as it is, or
    PEM text (containers pass the pair in their environment, as the other keys) written to a
    private file ``name`` in ``keys_dir`` first."""
    if "-----BEGIN" not in value:
        return value
    path = keys_dir / name
    text = value.replace("\\n", "\n").strip() + "\n"
    try:
        if path.read_text() == text:
            return str(path)
    except OSError:
        pass
    keys_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(path, text.encode())
    return str(path)


def celery_settings(keys_dir: Path, key: str = "", cert: str = "") -> dict[str, object]:
    """The ``CELERY_*`` settings of message signing: Celery's auth serializer for tasks and
    results, nothing else accepted. ``key``/``cert`` (``PANEL_TASK_SIGNING_KEY``/``_CERT``): a
    path or PEM text, shared by several machines; by default the pair made in ``keys_dir``."""
    key = configured(key, keys_dir, "task_signing_env.key")
    cert = configured(cert, keys_dir, "task_signing_env.crt")
    if not (key and cert):
        key, cert = map(str, ensure_keys(keys_dir))
    return {
        "CELERY_SECURITY_KEY": key,
        "CELERY_SECURITY_CERTIFICATE": cert,
        "CELERY_SECURITY_CERT_STORE": cert,
        "CELERY_SECURITY_DIGEST": "sha256",
        "CELERY_TASK_SERIALIZER": "auth",
        "CELERY_RESULT_SERIALIZER": "auth",
        "CELERY_ACCEPT_CONTENT": ["auth"],
        "CELERY_RESULT_ACCEPT_CONTENT": ["auth"],
    }


def main() -> None:
    """``python -m panel.signing``: a new pair as two lines for a compose env file (PEM with its
    line breaks written ``\\n``, which compose reads back inside double quotes)."""
    key_pem, cert_pem = _new_pair()
    for variable, pem in (("PANEL_TASK_SIGNING_KEY", key_pem), ("PANEL_TASK_SIGNING_CERT", cert_pem)):
        print(f'{variable}="' + pem.decode().strip().replace("\n", "\\n") + '"')


def ensure_keys(keys_dir: Path) -> tuple[Path, Path]:
    """The signing key and certificate in ``keys_dir``, made once: processes that start together
    (``make run`` starts the web, beat and the agents at once) wait for the first one's pair
    rather than each making its own."""
    key, cert = keys_dir / KEY_FILE, keys_dir / CERT_FILE
    if key.is_file() and cert.is_file():
        return key, cert
    keys_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(keys_dir / LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not (key.is_file() and cert.is_file()):
            key_pem, cert_pem = _new_pair()
            _write_private(key, key_pem)
            _write_private(cert, cert_pem)
    finally:
        os.close(fd)
    return key, cert


# --- what the signature covers ---------------------------------------------------------------------

SEAL = "pgpanel_seal"
# The headers a writer to the broker could otherwise change under a signed body.
SEALED_HEADERS = ("task", "id", "retries", "eta", "expires", "timelimit")
# A message without an expiry is refused this long after it was sent (or after its ETA): its
# id stays in the replay window that long, and no longer.
MAX_AGE = 7 * 24 * 3600
# How much longer than its message a replay key is kept: the clocks of several machines differ.
CLOCK_MARGIN = 300
RAN_PREFIX = "pgpanel:task-ran:"

_window: tuple[int, Any] | None = None


def _plain(value: object) -> Any:
    """``value`` as it reads after the trip through JSON (a tuple becomes a list)."""
    return json.loads(json.dumps(value))


def seal(body: object, headers: dict[str, Any], queue: str) -> None:
    """Copy the headers that decide what runs, and when, and the queue (the routing key) into
    the body that is about to be signed (``before_task_publish``; Celery's protocol 2 body is
    ``(args, kwargs, embed)`` and the worker hands ``embed``'s entries to the task as its
    request). A message sent otherwise carries no seal and is refused."""
    if isinstance(body, tuple) and len(body) == 3 and isinstance(body[2], dict):
        envelope = {field: headers.get(field) for field in SEALED_HEADERS}
        envelope.update(queue=queue, issued=time.time())
        body[2][SEAL] = _plain(envelope)


def _moment(value: object) -> float | None:
    if value is None:
        return None
    moment = dt.datetime.fromisoformat(str(value))
    if moment.tzinfo is None:  # Celery writes UTC; a naive time is read as UTC too
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def refusal(task_name: str, request: Any, queues: Collection[str], now: float | None = None) -> str | None:
    """Why the worker consuming ``queues`` must not run the message of ``request`` (a task's
    request, whose headers and signed seal the worker read) as the task ``task_name``, or None:
    it runs, and its id and retry count are now in the replay window. The reason names no
    argument or secret."""
    envelope = getattr(request, SEAL, None)
    if not isinstance(envelope, dict):
        return "it carries no signed seal of its name, id and expiry"
    seen = {field: getattr(request, field, None) for field in SEALED_HEADERS}
    seen["task"] = task_name
    for field in SEALED_HEADERS:
        if _plain(seen[field]) != envelope.get(field):
            return f"its {field} differs from the signed one"
    if envelope.get("queue") not in queues:
        return "it was signed for a queue this worker does not consume"
    now = time.time() if now is None else now
    try:
        expires = _moment(envelope["expires"])
        eta = _moment(envelope["eta"])
        issued = float(envelope["issued"])
    except (KeyError, TypeError, ValueError):
        return "its signed seal is malformed"
    if expires is not None and now >= expires:
        return "it expired"
    last = expires if expires is not None else max(issued, eta or issued) + MAX_AGE
    if now >= last:
        return f"it was sent more than {MAX_AGE // 3600} hours ago"
    try:
        first = ran_window().set(
            f"{RAN_PREFIX}{envelope['id']}:{envelope['retries']}",
            "1",
            nx=True,
            ex=int(last - now) + CLOCK_MARGIN,
        )
    except Exception as exc:  # redis raises several types; without the window nothing runs
        return f"the replay window in Redis is not reachable ({type(exc).__name__})"
    if not first:
        return "this id and retry count already ran (a replay)"
    return None


def ran_window() -> Any:
    """The Redis the replay window is kept in (the broker's), one client per process."""
    global _window
    if _window is None or _window[0] != os.getpid():
        import redis
        from django.conf import settings

        _window = (os.getpid(), redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5))
    return _window[1]


if __name__ == "__main__":
    main()
