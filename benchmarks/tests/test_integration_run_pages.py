"""Issue 11 items 2, 7 and 9 against a real cluster and real pgbench (the runner in the foreground):
a failed run's page says why first, the command shown is the one that ran (pasted into bash, it
runs again), and a plain run's summary lists only what applies to it."""

from __future__ import annotations

import html
import os
import re
import subprocess

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.services import room
from benchmarks.tests.test_integration_runs import run_now
from panel.clusters.models import Cluster

pytestmark = pytest.mark.integration


def page_of(owner: User, run: BenchmarkRun) -> str:
    client = Client()
    client.force_login(owner)
    url = reverse("benchmarks:run-detail", kwargs={"cluster_id": run.cluster_id, "run_id": run.pk})
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def succeeded_run(cluster: Cluster, duration_s: int) -> BenchmarkRun:
    """A run of 2 clients, run now, that succeeded."""
    run = run_now(cluster, clients=2, duration_s=duration_s)
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    return run


def test_a_refused_run_says_why_first_with_a_red_stopped_bar_no_chart_and_no_export(
    cluster: Cluster,  # noqa: F811
    owner: User,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The 1 GB plan lets 22 sessions in: 30 direct clients are refused before the first report.
    # The launch counts the free slots first (issue 38); here the count is skipped, as when other
    # clients take the slots between the count and pgbench's start, so pgbench meets the limit.
    monkeypatch.setattr(room.pools_services, "server_room", lambda cluster: None)
    run = run_now(cluster, clients=30, duration_s=20)
    assert run.status == RunStatus.FAILED, (run.status, run.error_message)
    assert not run.samples.exists()
    page = page_of(owner, run)

    why = page.index("bench-run-why")
    assert why < page.index("bench-run-status") and why < page.index("bench-figures")
    assert "More clients than the plan allows" in page
    assert "use a connection pool" in page.lower() or "Use a connection pool" in page
    assert "remaining connection slots are reserved" in page  # pgbench's own words, kept
    # Old code: a full, neutral bar ("0 s of 20 s" under 100 %).
    bar = re.search(r'<div class="progress-bar([^"]*)" data-progress="(\d+)"', page)
    assert bar is not None and "bg-danger" in bar.group(1) and bar.group(2) == "0"
    assert "Stopped after 0 s of 20 s" in page
    # No empty chart, a sentence; no export of nothing; error kinds in words.
    assert "<canvas" not in page and "data-bench-run-charts" not in page
    assert "No samples: the run stopped before its first progress report." in page
    assert "export.csv" not in page and "export.json" not in page
    assert ">connection_failed<" not in page

    client = Client()
    client.force_login(owner)
    for fmt in ("csv", "json"):
        url = reverse(
            "benchmarks:run-export", kwargs={"cluster_id": cluster.pk, "run_id": run.pk, "fmt": fmt}
        )
        response = client.get(url)
        assert response.status_code == 404
        assert "no samples to export" in response.content.decode()


def test_the_command_shown_is_the_argv_that_ran_and_pasting_it_runs_again(
    cluster: Cluster,  # noqa: F811
    owner: User,
) -> None:
    run = succeeded_run(cluster, duration_s=3)
    # Stored at spawn: the exact argument list, with the flags the runner adds (-l, --log-prefix).
    assert run.argv[0].endswith("pgbench") and "-l" in run.argv
    assert any(arg.startswith(f"--log-prefix={run.workdir}/") for arg in run.argv)
    assert run.argv_env["PGPASSWORD"] is None and "PGPASSWORD" in run.argv_env

    page = page_of(owner, run)
    shown = re.search(
        r'<pre class="conn-string mb-2" id="bench-command" data-exact="true">(.*?)</pre>', page, re.S
    )
    assert shown is not None
    command = html.unescape(shown.group(1))
    assert command == cmd.exact_command(run.argv, run.argv_env, run.workdir, run.custom_script)
    assert '--log-prefix="$WORKDIR"/txlog' in command and 'PGPASSWORD="$PGPASSWORD"' in command
    password = cluster.users.get(name=run.user).password
    assert password not in command

    # Pasted into bash, the one place a shell is the point: the user's paste is a shell snippet
    # (variables, mktemp, quoting), so this is exactly what they would run.
    env = {"PATH": os.environ["PATH"], "HOME": "/tmp", "PGPASSWORD": password}
    done = subprocess.run(
        ["bash", "-e", "-c", command + '\nls "$WORKDIR"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "number of clients: 2" in done.stdout and "duration: 3 s" in done.stdout
    assert "txlog." in done.stdout  # the transaction log went to the fresh work directory


def test_a_plain_run_summary_lists_only_what_applies(
    cluster: Cluster,  # noqa: F811
    owner: User,
) -> None:
    run = succeeded_run(cluster, duration_s=2)
    page = page_of(owner, run)
    summary = re.search(r'<dl class="bench-summary mb-0">(.*?)</dl>', page, re.S)
    assert summary is not None
    rows = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", summary.group(1))
    assert rows and "—" not in [value for _label, value in rows], rows
    labels = {label for label, _value in rows}
    assert {"TPS", "Clients", "Transactions processed"} <= labels
    # Features this run did not use have no row (rate, latency limit, retries, partitions).
    assert not labels & {"Latency limit (ms)", "Skipped transactions", "Total retries", "Partitions"}
    assert "Maximum tries" not in labels and "Run aborted" not in labels
    assert "How many database sessions pgbench opens at once" in page_of_tab(owner, cluster)


def page_of_tab(owner: User, of: Cluster) -> str:
    client = Client()
    client.force_login(owner)
    return client.get(reverse("benchmarks:tab", kwargs={"cluster_id": of.pk})).content.decode()
