"""The key and certificate every panel process signs and verifies Celery messages with (Celery's
``auth`` serializer, issue 29): the workers and node agents, which run as root, take only messages
signed by this key, so a task written onto the broker by anyone else (the broker's password is not
enough) is refused before it is decoded.

Generated on first start next to the panel's other keys (``keys/``, 0600; readable by the web
user's group under ``make run``, which must sign the calls it sends), never in the database. A
panel on several machines copies both files to every node (or names them with
``PANEL_TASK_SIGNING_KEY`` and ``PANEL_TASK_SIGNING_CERT``), as it shares the other keys.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
from pathlib import Path

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


if __name__ == "__main__":
    main()
