"""The node agent route (panel/core/agent.py): a process whose role is "web" sends the work on a
cluster's sockets, files and processes to the agent (a real Celery worker consuming the node's
queue) and gets back what the service returned, or its refusal, as if it had run in place."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connections

from panel.clusters.models import Cluster, Database, Node
from panel.clusters.services import roles
from panel.clusters.services.overview import Overview
from panel.clusters.tests.conftest import connect_as_client
from panel.core import agent
from panel.core.errors import ServiceError
from panel.pools import services as pools
from tests.fixtures.processes import start_celery_worker

# --- the wire: pure ------------------------------------------------------------------------------


def test_values_cross_the_wire_as_they_were() -> None:
    started = dt.datetime(2026, 11, 25, 9, 30, tzinfo=dt.UTC)
    value = {
        "overview": Overview(data_size_bytes=123, started_at=started),
        "pair": (1, "two", None),
        "by_number": {3: [1.5, True]},
        "id": uuid.UUID(int=7),
        "path": Path("/tmp/x"),
    }
    wire = agent.encode(value)
    assert agent.decode(wire) == value
    assert isinstance(agent.decode(wire)["pair"], tuple)


def test_only_the_panels_own_dataclasses_are_built_from_a_message() -> None:
    with pytest.raises(ValueError, match="not one of the panel's own modules"):
        agent.decode({"$dataclass": "subprocess:CompletedProcess", "fields": {"args": [], "returncode": 0}})
    with pytest.raises(ValueError, match="not a dataclass"):
        agent.decode({"$dataclass": "panel.core.agent:WebMayNotTouchProcesses", "fields": {}})


def test_values_that_cannot_cross_are_refused_before_sending() -> None:
    with pytest.raises(TypeError, match="cannot send a function"):
        agent.encode(lambda: None)


@pytest.mark.parametrize(
    "name",
    [
        "os.system",
        "subprocess.run",
        "panel.settings.SECRET_KEY",
        "panel.core.agent.send",  # the panel's own, but not marked @on_node
        "panel.core.runas.run_as",
    ],
)
def test_the_agent_runs_only_functions_marked_for_it(name: str) -> None:
    answer = agent.call.run(name, {"args": agent.encode([]), "kwargs": agent.encode({})})
    assert answer == {"crash": f"refused: {name} is not a function the node agent runs"}


def test_a_marked_function_is_found_by_name_after_its_module_is_imported() -> None:
    assert agent.lookup("panel.clusters.services.roles.add_database").__name__ == "add_database"


# --- a real agent ----------------------------------------------------------------------------------


@pytest.fixture
def agent_worker(redis_server: str, settings: object, transactional_db: None) -> Iterator[Path]:
    """The agent of this node ("local", where ``local_cluster`` lives) consuming its queue; this
    process acts as the web (role "web")."""
    node = django_settings.PANEL_NODE_NAME
    log = Path(django_settings.PANEL_DATA_DIR) / f"agent-{node}-{secrets.token_hex(3)}.log"
    # As make run starts it: role "agent", which registers its node and beats (a worker of role
    # "all" does neither, and a registration older than PANEL_NODE_DEAD_AFTER, by an earlier
    # test of this session, then left the web refusing to call it).
    proc = start_celery_worker(redis_server, f"node.{node}", log, concurrency=2, PANEL_PROCESS_ROLE="agent")
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    agent.forbid_processes_in_web()  # as the web server does at start
    # The web refuses to call an agent whose heartbeat is stale: on a loaded machine the node's
    # registration can be older than PANEL_NODE_DEAD_AFTER before the new agent's first beat.
    deadline = time.monotonic() + 60
    while not Node.objects.get(name=node).is_alive and time.monotonic() < deadline:
        time.sleep(0.2)
    if not Node.objects.get(name=node).is_alive:
        proc.kill()  # no teardown runs for a fixture that fails before its yield
        proc.wait()
        pytest.fail(f"the agent sent no heartbeat within 60 s:\n{log.read_text(errors='replace')[-4000:]}")
    yield log
    settings.PANEL_PROCESS_ROLE = "all"  # type: ignore[attr-defined]
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def calls_served(log: Path, expected: int) -> int:
    """The calls the agent's log says it served, once it says ``expected`` of them (the answer
    reaches the caller a moment before the worker logs the task's end) or after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        lines = log.read_text(errors="replace").splitlines()
        served = sum(1 for line in lines if "panel.core.agent.call[" in line and "succeeded" in line)
        if served >= expected or time.monotonic() > deadline:
            return served
        time.sleep(0.1)


@pytest.mark.integration
def test_the_web_adds_a_database_and_a_pool_through_the_agent(
    local_cluster: Cluster, agent_worker: Path
) -> None:
    database = roles.add_database(local_cluster, "agentdb")
    assert isinstance(database, Database) and database.name == "agentdb"
    with connect_as_client(local_cluster, dbname="agentdb") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("agentdb",)
    assert calls_served(agent_worker, 1) == 1

    # PostgreSQL's refusal and the service's own come back as a ServiceError on their field.
    with pytest.raises(ServiceError) as taken:
        roles.add_database(local_cluster, "agentdb")
    assert taken.value.field == "name" and "already exists" in taken.value.message

    pool = pools.create_pool(local_cluster, "agent-pool", "agentdb", None, "transaction", 5)
    assert pool.name == "agent-pool" and pool.cluster_id == local_cluster.pk
    overview = pools.pools_overview(local_cluster)
    assert overview.running and [row[0] for row in overview.pools] == [pool]
    assert overview.used == 5 and overview.slots is not None
    assert calls_served(agent_worker, 4) == 4  # add, refused add, create, overview: none ran here

    # gunicorn serves with threads: calls from several at once each get their own answer.
    def used(_call: int) -> int:
        try:
            return pools.pools_overview(local_cluster).used
        finally:
            connections.close_all()  # this thread's own connection to the test database

    with ThreadPoolExecutor(4) as threads:
        answers = list(threads.map(used, range(8)))
    assert answers == [5] * 8
    assert calls_served(agent_worker, 12) == 12


@pytest.mark.integration
def test_a_web_process_starts_and_signals_no_process(settings: object) -> None:
    agent.forbid_processes_in_web()
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    with pytest.raises(agent.WebMayNotTouchProcesses, match="subprocess.Popen refused"):
        subprocess.run(["true"], check=True)
    with pytest.raises(agent.WebMayNotTouchProcesses, match="os.kill refused"):
        os.kill(os.getpid(), 0)
    settings.PANEL_PROCESS_ROLE = "all"  # type: ignore[attr-defined]
    # Any other role runs them as before.
    assert subprocess.run(["true"], check=True).returncode == 0
    os.kill(os.getpid(), 0)


@pytest.mark.integration
def test_a_web_process_with_no_agent_says_so_and_does_nothing(
    local_cluster: Cluster, redis_server: str, settings: object
) -> None:
    # The call goes to the cluster's node, whatever node the web process calls its own.
    settings.PANEL_NODE_NAME = f"web{secrets.token_hex(3)}"  # type: ignore[attr-defined]
    settings.PANEL_PROCESS_ROLE = "web"  # type: ignore[attr-defined]
    local_cluster.node.name = f"nobody{secrets.token_hex(3)}"  # a node no agent serves
    with pytest.raises(ServiceError, match=r"node agent “nobody\w+” did not answer within 2 s"):
        agent.send("panel.clusters.services.roles.add_database", [local_cluster, "lonelydb"], {}, timeout=2)
    assert not local_cluster.databases.filter(name="lonelydb").exists()
