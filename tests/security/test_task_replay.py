"""Issue 37, item 6: the task signature covered the body only.

Celery's ``auth`` serializer signs a message's arguments; its headers (the task's name, id,
expiry, ETA, retry count) and its queue lay beside them unsigned. With the broker's password but
not the key, a captured message pushed again after its expiry with ``expires`` removed ran again,
the same signed body under another task's name ran that task, a message pushed twice ran twice,
and one signed for another node's queue ran on this one. The headers and the queue are now sealed
inside the signed body, and every task checks the seal, the expiry and a replay window in Redis
before its body runs (panel/signing.py). Replayed on the real Redis with a real worker (both
pools: the node agent's threads, the other workers' processes), beside the ways the panel
legitimately sends: at once, with an expiry, with a countdown, with time limits, as a retry of
the same id, as a chain.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import secrets
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery import chain
from django.conf import settings

from panel import signing
from panel.celery import app
from panel.clusters import tasks as cluster_tasks
from panel.core import taskqueue
from tests.fixtures.processes import start_celery_worker, wait_for_log

pytestmark = pytest.mark.integration

TASK = "panel.clusters.tasks.reconcile"
OTHER = "panel.insights.tasks.rollup"
QUEUES = {"q"}


@dataclasses.dataclass
class Worker:
    """A real worker on a queue of its own, started by the test once it has taken what it
    replays off that queue (a worker already running would take it first)."""

    queue: str
    log: Path
    start: Callable[[], None]


@pytest.fixture(params=["prefork", "threads"])  # the node agent's pool is threads (scripts/children.py)
def worker(request: pytest.FixtureRequest, redis_server: str, transactional_db: None) -> Iterator[Worker]:
    queue = f"sealed-{secrets.token_hex(3)}"
    log = Path(settings.PANEL_DATA_DIR) / f"worker-{queue}.log"
    started: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        started.append(start_celery_worker(redis_server, queue, log, concurrency=1, pool=request.param))

    yield Worker(queue, log, start)
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def broker(redis_server: str) -> redis.Redis:
    return redis.Redis.from_url(redis_server)


def capture(broker: redis.Redis, queue: str, **options: Any) -> dict[str, Any]:
    """A message the panel signed for ``queue``, taken off the broker as whoever reads Redis
    sees it (no worker consumes ``queue`` yet)."""
    taskqueue.send(TASK, [], queue=queue, **options)
    raw = broker.rpop(queue)
    assert raw is not None
    return json.loads(raw)


def push(broker: redis.Redis, queue: str, message: dict[str, Any]) -> None:
    message["properties"]["delivery_info"]["routing_key"] = queue
    message["properties"]["delivery_tag"] = str(uuid.uuid4())
    broker.lpush(queue, json.dumps(message))


def succeeded(text: str, name: str, task_id: str) -> int:
    return len(re.findall(rf"{re.escape(name)}\[{re.escape(task_id)}\] succeeded", text))


def refused(name: str, task_id: str, why: str) -> str:
    return f"refused the task message {name!r}[{task_id!r}]: {why}"


def after_all(worker: Worker) -> str:
    """The worker's log once the panel's own message, sent last, ran: everything pushed before
    it was taken (one process or thread takes them in order)."""
    last = taskqueue.send(TASK, [], queue=worker.queue).id
    return wait_for_log(worker.log, f"{TASK}[{last}] succeeded")


def test_an_expired_message_pushed_again_without_its_expiry_is_refused(
    worker: Worker, broker: redis.Redis
) -> None:
    message = capture(broker, worker.queue, expires=1)
    task_id = message["headers"]["id"]
    expires = dt.datetime.fromisoformat(message["headers"]["expires"])
    while dt.datetime.now(dt.UTC) <= expires:  # the message's own expiry is the event awaited
        time.sleep(0.1)
    message["headers"]["expires"] = None
    push(broker, worker.queue, message)
    worker.start()
    text = after_all(worker)
    assert succeeded(text, TASK, task_id) == 0  # before: it ran again
    assert refused(TASK, task_id, "its expires differs from the signed one") in text


def test_a_signed_body_under_another_name_id_eta_or_queue_is_refused(
    worker: Worker, broker: redis.Redis
) -> None:
    renamed = capture(broker, worker.queue)
    renamed_id = renamed["headers"]["id"]
    renamed["headers"]["task"] = OTHER
    # A new id too (so that no replay window matches).
    new_id = str(uuid.uuid4())
    other_id = capture(broker, worker.queue)
    other_id["headers"].update(id=new_id, root_id=new_id)
    other_id["properties"]["correlation_id"] = new_id
    # Held for an hour by its ETA: pushed without it, not at once.
    held = capture(broker, worker.queue, countdown=3600)
    held_id = held["headers"]["id"]
    held["headers"]["eta"] = None
    # Signed for another node's queue, pushed onto this one.
    elsewhere = capture(broker, f"elsewhere-{secrets.token_hex(3)}")
    elsewhere_id = elsewhere["headers"]["id"]
    for message in (renamed, other_id, held, elsewhere):
        push(broker, worker.queue, message)
    worker.start()
    text = after_all(worker)
    assert succeeded(text, OTHER, renamed_id) == 0  # before: the other task ran
    assert succeeded(text, TASK, new_id) == 0
    assert succeeded(text, TASK, held_id) == 0  # before: it ran at once
    assert succeeded(text, TASK, elsewhere_id) == 0
    assert refused(OTHER, renamed_id, "its task differs from the signed one") in text
    assert refused(TASK, new_id, "its id differs from the signed one") in text
    assert refused(TASK, held_id, "its eta differs from the signed one") in text
    assert refused(TASK, elsewhere_id, "it was signed for a queue this worker does not consume") in text


def test_a_message_pushed_twice_runs_once(worker: Worker, broker: redis.Redis) -> None:
    message = capture(broker, worker.queue, expires=300)
    task_id = message["headers"]["id"]
    push(broker, worker.queue, message)
    push(broker, worker.queue, message)
    # A retry count of its own, unsigned, does not make it a retry.
    message["headers"]["retries"] = 1
    push(broker, worker.queue, message)
    worker.start()
    text = after_all(worker)
    assert succeeded(text, TASK, task_id) == 1  # before: three times
    assert refused(TASK, task_id, "this id and retry count already ran (a replay)") in text
    assert refused(TASK, task_id, "its retries differs from the signed one") in text


def test_the_panels_own_ways_of_sending_still_run(worker: Worker) -> None:
    """At once, with an expiry (beat's and the agent's calls), with a countdown (an ETA), with
    time limits (benchmarks), as a retry (Celery's ``Task.retry`` sends the same id with the next
    retry count and an ETA), and as a chain, whose next task the worker sends."""
    worker.start()
    queue = worker.queue
    plain = taskqueue.send(TASK, [], queue=queue).id
    expiring = taskqueue.send(TASK, [], queue=queue, expires=300).id
    later = taskqueue.send(TASK, [], queue=queue, countdown=1).id
    limited = taskqueue.send(TASK, [], queue=queue, soft_time_limit=60, time_limit=90).id
    retried = str(uuid.uuid4())
    taskqueue.send(TASK, [], queue=queue, task_id=retried)
    wait_for_log(worker.log, f"{TASK}[{retried}] succeeded")
    # Celery's own Task.retry, as the worker's process calls it inside that task.
    task = cluster_tasks.reconcile
    task.push_request(
        id=retried,
        retries=0,
        args=[],
        kwargs={},
        delivery_info={"exchange": "", "routing_key": queue},
        called_directly=False,
    )
    try:
        task.retry(countdown=1, max_retries=3, throw=False)
    finally:
        task.pop_request()
    steps = chain(
        app.signature(TASK, immutable=True, queue=queue), app.signature(TASK, immutable=True, queue=queue)
    ).apply_async()
    ids = [plain, expiring, later, limited, steps.parent.id, steps.id]
    wait_for_log(worker.log, *(f"{TASK}[{task_id}] succeeded" for task_id in ids))
    deadline = time.monotonic() + 30  # the retry waits for its ETA
    while succeeded(text := worker.log.read_text(errors="replace"), TASK, retried) < 2:
        assert time.monotonic() < deadline, text[-4000:]
        time.sleep(0.2)
    assert "refused the task message" not in text


def request(**fields: Any) -> SimpleNamespace:
    seal = {
        "task": TASK,
        "id": "a",
        "retries": 0,
        "eta": None,
        "expires": None,
        "timelimit": [None, None],
        "queue": "q",
        "issued": time.time(),
    }
    seal.update(fields.pop("seal", {}))
    headers = {key: value for key, value in seal.items() if key not in ("task", "queue", "issued")}
    headers.update(fields)
    return SimpleNamespace(**headers, pgpanel_seal=seal)


def test_a_signed_expiry_or_age_that_passed_is_refused_before_the_replay_window() -> None:
    """The checks that need no Redis (Celery discards a message whose ``expires`` header passed
    before the task sees it; this holds even when it does not)."""
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).isoformat()
    assert signing.refusal(TASK, request(seal={"expires": past}), QUEUES) == "it expired"
    old = time.time() - signing.MAX_AGE - 1
    assert signing.refusal(TASK, request(seal={"issued": old}), QUEUES).startswith("it was sent more than")
    assert (
        signing.refusal(TASK, SimpleNamespace(id="a"), QUEUES)
        == "it carries no signed seal of its name, id and expiry"
    )
    assert (
        signing.refusal(TASK, request(timelimit=[None, 5]), QUEUES)
        == "its timelimit differs from the signed one"
    )
    assert signing.refusal(TASK, request(seal={"issued": "x"}), QUEUES) == "its signed seal is malformed"
