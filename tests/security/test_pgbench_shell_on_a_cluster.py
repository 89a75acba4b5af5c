"""Row 5 of issue 10 on a real cluster: a pgbench custom script cannot leave the database.

Before: a custom script holding ``\\shell touch /tmp/x`` (form or ``bench run --file``) created the
file as ``postgres``, the user that runs every cluster. Now such scripts are refused at every way in
(the web form, ``manage.py bench``, the executor of a run queued before the rule), before anything
is queued, and pgbench itself (runs and the pre-launch checks) runs as ``PANEL_BENCH_USER``, which
owns nothing of any cluster, in a private work directory; a script that only talks to the database
still runs to success.

Everything here is real: one PostgreSQL cluster for the module, the real pgbench (also given the
refused spellings directly, to show each one really runs a program), the web form through Django's
test client and ``manage.py bench``. The rule alone, without a cluster, is
tests/security/test_pgbench_shell_rule.py.
"""

from __future__ import annotations

import io
import json
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from benchmarks import services
from benchmarks.engine import runner
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import BenchmarkRun, RunStatus
from benchmarks.tests.test_views_forms import RUN, field_errors
from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from panel.core import runas
from panel.core.errors import ServiceError
from tests.fixtures.clusters import make_local_cluster
from tests.security.pgbench_watch import SpawnSpy, watch_pgbench
from tests.security.shell_spellings import ALLOWED, LEGITIMATE, REFUSED, REFUSED_IDS, SHELL_MESSAGE

pytestmark = pytest.mark.integration


# --- one real cluster for the module ------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """A real, running cluster owned by ``sec-bench-owner``; the tests roll back what they write."""
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        owner = User.objects.create_user("sec-bench-owner", "sec-bench@example.com", "sec-bench-password-1")
        made = make_local_cluster(owner, name="sec-bench")
    yield made
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        if Cluster.objects.filter(pk=made.pk).exists():
            made.refresh_from_db()
            cluster_services.delete_cluster(made, confirm_name=made.name)
        owner.delete()


@pytest.fixture
def owner_client(cluster: Cluster, db: None) -> Client:
    client = Client()
    client.force_login(cluster.owner)
    return client


def bench(*args: str) -> str:
    out = io.StringIO()
    call_command("bench", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def bench_uid() -> int:
    return runner.bench_user().uid


@pytest.fixture
def shell_target() -> Iterator[Path]:
    """A path the bench user could create (in /tmp, mode 1777): it appearing would be the attack."""
    path = Path(tempfile.gettempdir()) / f"sec-bench-shell-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


@pytest.mark.parametrize("script", [s for _n, s in ALLOWED], ids=[n for n, _s in ALLOWED])
def test_the_allowed_scripts_pass_the_whole_pre_launch_check(cluster: Cluster, db: None, script: str) -> None:
    services.validate_run(
        cluster,
        pool=None,
        database="defaultdb",
        user=None,
        options=cmd.RunOptions(clients=1, threads=1, transactions=1),
        custom_script=script,
    )


# --- (b) the web form ---------------------------------------------------------------------------


def test_the_form_refuses_a_setshell_script_next_to_the_field_and_records_nothing(
    cluster: Cluster, owner_client: Client, shell_target: Path
) -> None:
    script = f"\\set aid random(1, 100)\n\\setshell out touch {shell_target}\nSELECT :aid;\n"
    response = owner_client.post(
        reverse("benchmarks:run-launch", args=[cluster.pk]),
        {
            **RUN,
            "script": "custom",
            "custom_script": script,
            "duration": "",
            "transactions": "1",
            "clients": "1",
        },
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    errors = " ".join(field_errors(response.content.decode(), "custom_script"))
    assert f"Line 2: \\setshell {SHELL_MESSAGE}" in errors
    assert not BenchmarkRun.objects.exists()
    assert not shell_target.exists()


def test_the_form_still_launches_a_script_with_set_and_sleep(
    cluster: Cluster, owner_client: Client, redis_server: str
) -> None:
    response = owner_client.post(
        reverse("benchmarks:run-launch", args=[cluster.pk]),
        {**RUN, "script": "custom", "custom_script": LEGITIMATE, "clients": "1"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200 and "HX-Redirect" in response.headers, response.content.decode()[:2000]
    run = BenchmarkRun.objects.get()
    assert run.status == RunStatus.QUEUED and run.custom_script.strip() == LEGITIMATE.strip()


# --- (c) the command line -----------------------------------------------------------------------


def test_bench_run_file_with_shell_fails_clearly_and_the_file_never_appears(
    cluster: Cluster, db: None, tmp_path: Path, shell_target: Path
) -> None:
    script = tmp_path / "attack.sql"
    script.write_text(f"SELECT 1;\n\\shell touch {shell_target}\n")
    with pytest.raises(CommandError) as refused:
        bench(
            "run", cluster.name, "--database", "defaultdb", "--clients", "1", "--transactions", "1",
            "--file", str(script), "--wait",
        )  # fmt: skip
    assert str(refused.value) == f"Line 2: \\shell {SHELL_MESSAGE} (custom_script)"
    assert not BenchmarkRun.objects.exists()
    time.sleep(0.5)  # nothing running could still create it
    assert not shell_target.exists()


# --- (d) the legitimate neighbour, for real -----------------------------------------------------


def test_a_custom_script_with_set_and_sleep_runs_to_success_from_the_command_line(
    cluster: Cluster, db: None, tmp_path: Path
) -> None:
    script = tmp_path / "legit.sql"
    script.write_text(LEGITIMATE)
    record = json.loads(
        bench(
            "run",
            cluster.name,
            "--database",
            "defaultdb",
            "--clients",
            "2",
            "--threads",
            "1",
            "--transactions",
            "20",
            "--file",
            str(script),
            "--wait",
            "--format",
            "json",
        )  # fmt: skip
    )
    assert record["status"] == "succeeded", record
    assert record["summary"]["transactions_processed"] == 40 and record["errors"] == 0
    assert record["summary"]["transaction_type"].endswith("custom.sql")


# --- (e) pgbench runs as the bench user, in a private work directory ----------------------------


def test_pgbench_runs_as_the_bench_user_in_a_private_directory_removed_afterwards(
    cluster: Cluster, db: None
) -> None:
    run = services.launch_run(
        cluster,
        database="defaultdb",
        options=cmd.RunOptions(clients=2, threads=1, duration_s=3),
        custom_script=LEGITIMATE,
        enqueue=False,
    )
    found: list[dict[str, object]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_pgbench, args=(found, stop), daemon=True)
    watcher.start()
    try:
        run = services.execute_run(run.pk, wait_turn_s=30)
    finally:
        stop.set()
        watcher.join(5)
    assert run.status == RunStatus.SUCCEEDED, (run.error_message, run.first_error)
    assert found, "pgbench was never seen running"
    seen = found[0]
    uid = bench_uid()
    assert uid not in (0, runas.os_user().uid)
    assert seen["uids"] == (uid, uid, uid)
    assert seen["gids"] == {runner.bench_user().gid}
    workdir = Path(str(seen["cwd"]))
    assert workdir.name.startswith(services.workdir_prefix(run))
    assert (seen["cwd_mode"], seen["cwd_uid"]) == (0o700, uid)
    assert "custom.sql" in seen["cwd_files"]  # type: ignore[operator]
    # The environment is minimal and the password is only there, never in the arguments.
    environ: dict[str, str] = seen["environ"]  # type: ignore[assignment]
    assert set(environ) <= {
        "PATH", "HOME", "LANG", "LC_ALL", "PGPASSWORD", "PGSSLMODE", "PGCONNECT_TIMEOUT", "PGAPPNAME",
    }  # fmt: skip
    password = environ["PGPASSWORD"]
    assert password and not any(password in arg for arg in seen["cmdline"])  # type: ignore[union-attr]
    # The worker (root) read the transaction logs pgbench wrote there: the percentiles exist.
    assert run.samples.filter(p50_ms__isnull=False).exists()
    assert not workdir.exists()


def _pgbench_directly(cluster: Cluster, workdir: Path, script_text: str) -> str:
    """Below the rule: the runner alone runs ``script_text`` once; pgbench's stderr."""
    script = workdir / f"direct-{uuid.uuid4().hex}.sql"
    runner.write_private(script, script_text)
    target = services.resolve_target(cluster, pool=None, database="defaultdb", user=None)
    options = cmd.RunOptions(clients=1, threads=1, transactions=1, custom_script_path=str(script))
    args = cmd.build_run_args(runner.pgbench_path(cluster.version), target.connection, options)
    env = cmd.build_env(target.password, target.connection.sslmode, base=runner.base_env())
    proc = runner.LoadProcess(args, env, cwd=workdir)
    deadline = time.monotonic() + 30
    stderr = []
    while not proc.done and time.monotonic() < deadline:
        line = proc.next_line(0.5)
        if line is not None and line.stream == runner.STDERR:
            stderr.append(line.text)
    assert proc.wait(5) is not None, "pgbench did not finish"
    return "".join(stderr)


@pytest.fixture
def bench_workdir() -> Iterator[Path]:
    workdir = runner.make_workdir("pgbench-sec-test-")
    yield workdir
    runner.remove_workdir(workdir)


@pytest.mark.parametrize(("script", "runs"), [(s, runs) for _n, s, _l, runs in REFUSED], ids=REFUSED_IDS)
def test_the_spellings_the_rule_refuses_are_ones_pgbench_really_executes(
    cluster: Cluster, db: None, bench_workdir: Path, script: str, runs: bool
) -> None:
    """The rule's cases are not guesses about pgbench's lexer: given to pgbench directly (the runner
    alone, as the bench user, in a directory it owns), each runs its program, except the ones
    refused as a precaution."""
    marker = bench_workdir / "ran"
    stderr = _pgbench_directly(cluster, bench_workdir, script.format(target=marker))
    assert marker.exists() is runs, stderr
    if runs:
        assert marker.stat().st_uid == bench_uid()


def test_a_shell_command_that_slipped_through_would_run_as_the_bench_user_and_not_touch_a_cluster(
    cluster: Cluster, db: None, bench_workdir: Path
) -> None:
    """Below the rule: a \\shell that reached pgbench runs as the bench user, which cannot write a
    cluster's files. Hidden behind a comment ended by a carriage return, which pgbench executes."""
    intruder = cluster.pgdata / "written-by-pgbench"
    try:
        stderr = _pgbench_directly(
            cluster,
            bench_workdir,
            f"SELECT 1; -- harmless\r\\shell id -u > {bench_workdir}/uid\n\\shell touch {intruder}\n",
        )
        assert (bench_workdir / "uid").read_text().strip() == str(bench_uid()), stderr
        assert not intruder.exists()
        assert re.search(r"shell command|Permission denied", stderr), stderr
    finally:
        intruder.unlink(missing_ok=True)


def test_a_queued_run_holding_shell_is_refused_by_the_executor(
    cluster: Cluster, db: None, shell_target: Path
) -> None:
    """A run recorded before the rule existed (or written around the launch service) never runs."""
    run = services.launch_run(
        cluster,
        database="defaultdb",
        options=cmd.RunOptions(clients=1, threads=1, transactions=1),
        custom_script=LEGITIMATE,
        enqueue=False,
    )
    BenchmarkRun.objects.filter(pk=run.pk).update(custom_script=f"\\shell touch {shell_target}\nSELECT 1;\n")
    run = services.execute_run(run.pk, wait_turn_s=30)
    assert run.status == RunStatus.FAILED
    assert run.error_message == f"Line 1: \\shell {SHELL_MESSAGE}"
    assert run.pgbench_pid is None and not shell_target.exists()


# --- (f) the pre-launch check goes through the runner, as the bench user ------------------------


def test_the_pre_launch_check_runs_pgbench_as_the_bench_user_and_keeps_its_message(
    cluster: Cluster, db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = SpawnSpy(monkeypatch)
    options = cmd.RunOptions(clients=1, threads=1, transactions=1)
    with pytest.raises(ServiceError) as refused:
        services.validate_run(
            cluster, pool=None, database="defaultdb", user=None, options=options,
            custom_script="SELECT 1;\n\\set aid random(1,\n",
        )  # fmt: skip
    assert refused.value.field == "custom_script"
    assert refused.value.message.startswith('script.sql:2: syntax error in command "set"')
    services.validate_run(
        cluster, pool=None, database="defaultdb", user=None, options=options, custom_script=LEGITIMATE
    )
    uid = bench_uid()
    assert spy.uids == [(uid, uid, uid), (uid, uid, uid)]
    assert [path.name.startswith("pgbench-check-") for path in spy.workdirs] == [True, True]
    assert not any(path.exists() for path in spy.workdirs), "check directories are removed"
