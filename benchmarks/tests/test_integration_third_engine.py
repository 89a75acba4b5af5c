"""Issue 30 item 2: a third engine is one module. ``benchmarks/tests/third_engine.py`` (a Python
program with a progress format of its own) is named in ``PANEL_BENCH_ENGINES`` and runs end to end
through the real service path: the form's choices, launch, a real Celery worker, the program under
the runner, the generic recorder, the summary on the run page; and the CLI offers it."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from benchmarks import services
from benchmarks.forms.run import RunForm
from benchmarks.lib import engines
from benchmarks.models import BenchmarkRun, RunStatus
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from tests.fixtures.processes import start_celery_worker

pytestmark = pytest.mark.integration

MODULE = "benchmarks.tests.third_engine"
QUEUE = "benchmarks-third-engine"


@pytest.fixture
def pulse(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The engine registered here as the setting registers it in every process; gone afterwards."""
    monkeypatch.setenv("PANEL_BENCH_ENGINES", MODULE)  # read by the worker's settings
    importlib.reload(importlib.import_module(MODULE))
    yield "pulse"
    engines.unregister("pulse")


@pytest.fixture
def pulse_worker(
    pulse: str, redis_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[subprocess.Popen[bytes]]:
    """A worker of its own on a queue of its own, where the runs go: the session's worker is
    started without the setting, and must not take this run."""
    proc = start_celery_worker(redis_server, QUEUE, tmp_path / "pulse-worker.log", concurrency=1)
    monkeypatch.setattr(Cluster, "work_queue", QUEUE)  # read by enqueue.send_job
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.mark.django_db
def test_a_third_engine_refuses_what_its_rules_refuse_and_the_cli_offers_it(
    owner: User, pulse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = make_cluster_row(owner)
    form = RunForm(
        {"engine": pulse, "target": "direct", "database": "defaultdb", "clients": "1", "progress": "1",
         "transactions": "5", "script": "select-1", "query_mode": "simple"},
        cluster=cluster,
    )  # fmt: skip
    assert not form.is_valid() and "pulse runs for a duration." in str(form.errors)
    form = RunForm(
        {"engine": pulse, "target": "direct", "database": "defaultdb", "clients": "1", "progress": "1",
         "duration": "3", "script": "select-1", "pulse_statement": "DELETE FROM t"},
        cluster=cluster,
    )  # fmt: skip
    assert not form.is_valid() and form.errors["pulse_statement"] == ["pulse runs one SELECT."]
    # Its field is on the page, for pulse only; pgbench's -C box is marked as pgbench's.
    page = form.as_div()
    assert "pulse_statement" in page
    assert not BenchmarkRun.objects.exists()
    with pytest.raises(SystemExit):
        call_command("bench", "run", "--help")
    usage = capsys.readouterr().out
    assert "{pgbench,sysbench,pulse}" in usage and "select-1" in usage and "pulse: statement" in usage
    assert engines.extra_from_text("pulse", ["statement=SELECT 3"]) == (("statement", "SELECT 3"),)
    with pytest.raises(ValueError, match="its fields: statement"):
        engines.extra_from_text("pulse", ["rows=3"])


def test_a_third_engine_module_runs_end_to_end_through_a_worker_to_the_run_page(
    local_cluster: Cluster,
    owner: User,
    pulse: str,
    pulse_worker: subprocess.Popen[bytes],
    wait_until: Callable[..., object],
) -> None:
    # The form offers it with its own script, and builds its options from what it asks for.
    form = RunForm(
        {"engine": pulse, "target": "direct", "database": "defaultdb", "clients": "1", "duration": "3",
         "progress": "1", "script": "select-1", "query_mode": "simple", "percentiles": "on",
         "pulse_statement": "SELECT 2"},
        cluster=local_cluster,
    )  # fmt: skip
    assert (pulse, "pulse") in form.fields["engine"].choices
    assert form.is_valid(), form.errors
    options = form.options()
    assert options.engine == pulse and options.builtin == "select-1"
    assert options.extra_values == {"statement": "SELECT 2"}  # its own field, built from its spec

    run = services.launch_run(local_cluster, **form.service_kwargs())
    assert run.percentile_sampling_rate is None  # no transaction log: none asked of pulse

    def finished() -> bool:
        run.refresh_from_db()
        return run.is_terminal

    wait_until(finished, timeout=40, message="the pulse run finished")
    assert run.status == RunStatus.SUCCEEDED, (run.error_message, run.first_error)
    assert run.worker_pid and run.worker_pid != os.getpid()
    assert run.argv[0].endswith("python3") and run.argv[-1] == "SELECT 2"
    assert "PGPASSWORD" not in " ".join(run.argv)
    samples = list(run.samples.order_by("seq"))
    assert len(samples) >= 2 and all(s.tps > 0 and s.latency_avg_ms for s in samples)
    assert run.summary and run.summary["transactions_processed"] >= sum(round(s.tps) for s in samples)
    assert run.client["cpu_s"] is not None

    client = Client()
    client.force_login(owner)
    page = client.get(
        reverse("benchmarks:run-detail", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    ).content.decode()
    assert "pulse" in page and "Transactions processed" in page
    assert "pgbench is running" not in page and "pgbench ran" not in page
