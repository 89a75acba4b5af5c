"""Issue 29, item 6: the node agent executed whatever task reached the broker.

Whoever could write to Redis (its password is in ``keys/``, and an external Redis is reached over
the network) could push a task onto a queue that a root worker takes. Every message is now signed
with the panel's key (Celery's ``auth`` serializer) and the workers take only signed ones. Replayed
on the real Redis with a real worker: a task written onto its queue as Celery's JSON protocol
(what anyone with the broker's address and password can do) and one signed with another key are
both refused and never run; a task the panel sends runs. What the signature covers besides the
arguments (the task's name, id, expiry, queue) and the replay window: test_task_replay.py.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from celery.security.certificate import Certificate
from celery.security.key import PrivateKey
from celery.security.serialization import SecureSerializer
from django.conf import settings

from panel import signing
from panel.core import taskqueue
from tests.fixtures.processes import start_celery_worker, wait_for_log

pytestmark = pytest.mark.integration

TASK = "panel.clusters.tasks.reconcile"


@pytest.fixture
def worker(redis_server: str, transactional_db: None) -> Iterator[tuple[str, Path]]:
    queue = f"signed-{secrets.token_hex(3)}"
    log = Path(settings.PANEL_DATA_DIR) / f"worker-{queue}.log"
    proc = start_celery_worker(redis_server, queue, log, concurrency=1)
    yield queue, log
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def raw_message(queue: str, task_id: str, content_type: str, body: bytes) -> str:
    """A task message as kombu's Redis transport writes it (Celery's protocol 2)."""
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-encoding": "utf-8",
            "content-type": content_type,
            "headers": {
                "lang": "py",
                "task": TASK,
                "id": task_id,
                "root_id": task_id,
                "parent_id": None,
                "group": None,
                "retries": 0,
                "eta": None,
                "expires": None,
                "timelimit": [None, None],
                "argsrepr": "()",
                "kwargsrepr": "{}",
                "origin": "attacker@elsewhere",
                "ignore_result": True,
            },
            "properties": {
                "correlation_id": task_id,
                "reply_to": "",
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
    )


def test_a_task_not_signed_by_the_panel_is_refused_and_the_panels_runs(
    worker: tuple[str, Path], redis_server: str, tmp_path: Path
) -> None:
    queue, log = worker
    broker = redis.Redis.from_url(redis_server)
    body = json.dumps([[], {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]).encode()

    # Celery's own JSON protocol, as anyone who can write to the broker sends it.
    forged = str(uuid.uuid4())
    broker.lpush(queue, raw_message(queue, forged, "application/json", body))
    # Signed, but with a key of the attacker's own.
    key, cert = signing.ensure_keys(tmp_path / "attacker")
    other = SecureSerializer(PrivateKey(key.read_text()), Certificate(cert.read_text()), digest="sha256")
    signed_elsewhere = str(uuid.uuid4())
    payload = other.serialize([[], {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}])
    broker.lpush(queue, raw_message(queue, signed_elsewhere, "application/data", payload.encode()))

    # The legitimate action beside it: the panel's own message, sent after both, runs.
    sent = taskqueue.send(TASK, [], queue=queue)
    text = wait_for_log(log, f"{TASK}[{sent.id}] succeeded", seconds=20)
    assert f"{TASK}[{sent.id}] received" in text
    for task_id in (forged, signed_elsewhere):  # never received, let alone run
        assert f"{TASK}[{task_id}] received" not in text and f"{TASK}[{task_id}] succeeded" not in text
    assert "Refusing to deserialize untrusted content of type json" in text
    assert "Unknown certificate" in text


def test_containers_pass_the_pair_as_pem_in_their_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docker/compose.yaml gives every container the same pair (``python -m panel.signing``
    prints it for the env file): each writes it to a private file that Celery reads."""
    signing.main()
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    key_value = lines["PANEL_TASK_SIGNING_KEY"].strip('"')  # compose keeps "\n" escaped here
    key = Path(signing.configured(key_value, tmp_path / "keys", "env.key"))
    assert (
        key.read_text().startswith("-----BEGIN PRIVATE KEY-----\n")
        and oct(key.stat().st_mode & 0o777) == "0o600"
    )
    PrivateKey(key.read_text())  # Celery loads it
    cert_value = lines["PANEL_TASK_SIGNING_CERT"].strip('"').replace("\\n", "\n")  # or expanded
    Certificate(Path(signing.configured(cert_value, tmp_path / "keys", "env.crt")).read_text())
    assert signing.configured("/etc/pgpanel/k.pem", tmp_path, "x") == "/etc/pgpanel/k.pem"
