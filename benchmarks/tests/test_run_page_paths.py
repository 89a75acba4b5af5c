"""A run whose pgbench could not connect through the server's socket (issue 38): libpq names the
socket's path (``connection to server on socket "/…/.s.PGSQL.N" failed``), and the run page,
its errors, the compare page's record and the JSON export showed it. Replayed with the real
pgbench, its output recorded as the executor records it; the page says what went wrong about the
run in the panel's words and keeps pgbench's, without the path.

Beside it, a real server through its socket refusing clients over max_connections: the page
still says "More clients than the plan allows" with pgbench's own reason."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client

from benchmarks.engine import runner
from benchmarks.lib import engines
from benchmarks.lib.run_options import RunOptions
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services import read
from benchmarks.services.recorder import RunRecorder
from benchmarks.tests.test_views_pages import make_run, run_url
from panel.clusters.models import Cluster
from tests import pgserver

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def small_server() -> Iterator[pgserver.Throwaway]:
    """A real PostgreSQL with room for two clients, reached through its socket."""
    port = pgserver.free_port_outside(26800, 26999, address="127.0.0.1")
    with pgserver.throwaway_server(
        port=port,
        listen_addresses="",
        pg_hba="local all all trust\n",
        superuser="bench",
        settings="max_connections = 2\nsuperuser_reserved_connections = 0\n",
    ) as server:
        Path(server.socket_dir).chmod(0o755)  # pgbench runs as the benchmarks' own user
        yield server


def _record(run: BenchmarkRun, args: list[str]) -> BenchmarkRun:
    """Run the real pgbench with ``args`` and record its output as the executor does."""
    options = RunOptions(clients=run.clients, threads=1, transactions=1)
    recorder = RunRecorder(run, engines.ENGINES["pgbench"].reader(options))
    proc = runner.LoadProcess([runner.pgbench_path(), *args], runner.base_env())
    deadline = time.monotonic() + 30
    while not proc.done and time.monotonic() < deadline:
        line = proc.next_line(0.2)
        if line is not None:
            recorder.handle(line)
    returncode = proc.wait(10)
    recorder.finish(returncode, cancelled=False, stopped_reason="")
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_a_socket_nobody_listens_on_is_said_without_its_path(
    cluster_row: Cluster, owner_client: Client
) -> None:
    socket_dir = runner.make_workdir()  # a real directory, no server behind it
    try:
        run = make_run(cluster_row, status=RunStatus.RUNNING, summary=None, exit_code=None, clients=1)
        run = _record(run, ["-h", str(socket_dir), "-p", "1", "-n", "-t", "1", "-c", "1", "defaultdb"])
    finally:
        runner.remove_workdir(socket_dir)
    assert run.status == RunStatus.FAILED
    assert "on the server's socket" in run.first_error and str(socket_dir) not in run.first_error

    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert "Could not connect to the server" in page
    assert "connection to server on the server&#x27;s socket failed" in page  # pgbench's words, kept
    assert ".s.PGSQL" not in page and str(socket_dir) not in page

    exported = read.export_run(run, "json")
    assert ".s.PGSQL" not in exported and str(socket_dir) not in exported
    assert json.loads(exported)["errors"]


@pytest.mark.django_db
def test_old_rows_that_name_the_socket_show_no_path(cluster_row: Cluster, owner_client: Client) -> None:
    said = 'connection to server on socket "/var/lib/pgpanel/c1/run/.s.PGSQL.26900" failed: No such file or directory'
    run = make_run(
        cluster_row,
        status=RunStatus.FAILED,
        exit_code=1,
        summary=None,
        error_message=f"could not start: {said}",
        first_error=said,
    )
    run.errors.create(at=run.started_at, kind="connection_failed", message=said)

    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    record = read.run_record(run)

    assert "/var/lib/pgpanel" not in page and ".s.PGSQL" not in page
    assert "/var/lib/pgpanel" not in record["first_error"] + record["error_message"]
    assert "Could not connect to the server" in page


@pytest.mark.django_db
def test_too_many_clients_through_the_socket_is_explained(
    cluster_row: Cluster, owner_client: Client, small_server: pgserver.Throwaway
) -> None:
    run = make_run(cluster_row, status=RunStatus.RUNNING, summary=None, exit_code=None, clients=8)
    workdir = runner.make_workdir()
    try:
        script = workdir / "one.sql"  # a script of its own: no pgbench tables needed
        runner.write_private(script, "SELECT pg_catalog.pg_sleep(0.5);\n")
        args = ["-h", small_server.socket_dir, "-p", str(small_server.port), "-U", "bench", "-n", "-c", "8"]
        run = _record(run, [*args, "-f", str(script), "-t", "1", "postgres"])
    finally:
        runner.remove_workdir(workdir)
    assert run.status in (RunStatus.FAILED, RunStatus.COMPLETED_WITH_ERRORS), run.error_message

    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert "More clients than the plan allows" in page
    assert "too many clients already" in page  # pgbench's reason, as it said it
    assert small_server.socket_dir not in page and ".s.PGSQL" not in page
    assert Path(small_server.socket_dir).is_dir()
