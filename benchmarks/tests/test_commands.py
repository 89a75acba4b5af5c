"""`manage.py bench …` on a real cluster, in the foreground."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture
def local_cluster(shared_local_cluster: Cluster) -> Cluster:
    """One real cluster for the module's tests (none of them changes what the next one needs)."""
    return shared_local_cluster


def bench(*args: str) -> str:
    out = io.StringIO()
    call_command("bench", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_bench_init_run_wait_json_then_list_show_export(local_cluster: Cluster) -> None:
    name = local_cluster.name
    assert "succeeded: defaultdb at scale 1" in bench(
        "init", name, "--database", "defaultdb", "--scale", "1", "--wait"
    )

    printed = bench(
        "run", name, "--database", "defaultdb", "--clients", "2", "--threads", "1", "--duration", "3",
        "--script", "select-only", "--wait", "--format", "json",
    )  # fmt: skip
    record = json.loads(printed)
    assert record["status"] == "succeeded"
    assert record["tps"] > 0 and record["latency_avg_ms"] > 0
    assert record["samples"] >= 2 and record["errors"] == 0
    assert record["summary"]["transaction_type"].startswith("<builtin: select only>")

    run_id = record["id"]
    assert run_id in bench("list", name)
    assert "status     succeeded" in bench("show", run_id)
    assert bench("export", run_id, "--format", "csv").startswith("seq,elapsed_s,tps")
    assert json.loads(bench("export", run_id, "--format", "json"))["id"] == run_id
    with pytest.raises(CommandError, match="only a queued or running run"):
        bench("cancel", run_id)
    with pytest.raises(CommandError, match="No run"):
        bench("show", "not-a-uuid")
    with pytest.raises(CommandError, match="No cluster"):
        bench("list", "nope")


SYSBENCH_ON_DEFAULTDB = ("--database", "defaultdb", "--engine", "sysbench")


def test_bench_sysbench_prepare_run_and_cleanup(local_cluster: Cluster) -> None:
    name = local_cluster.name
    printed = bench("init", name, *SYSBENCH_ON_DEFAULTDB, "--tables", "1", "--table-size", "1000", "--wait")
    assert "succeeded: defaultdb sysbench 1 × 1,000 rows" in printed
    record = json.loads(
        bench(
            "run",
            name,
            *SYSBENCH_ON_DEFAULTDB,
            "--script",
            "oltp_point_select",
            "--clients",
            "2",
            "--duration",
            "2",
            "--wait",
            "--format",
            "json",
        )  # fmt: skip
    )
    assert record["status"] == "succeeded" and record["engine"] == "sysbench"
    assert record["script"] == "oltp_point_select" and record["samples"] >= 1
    assert record["summary"]["qps"] >= record["tps"] > 0 and record["latency_avg_ms"] > 0
    assert "sysbench oltp_point_select" in record["command"] and "--tables=1" in record["command"]

    assert "1 data sets forgotten" in bench("cleanup", name, "--database", "defaultdb")
    with dbconn.monitor_connection(local_cluster, dbname="defaultdb") as conn:
        assert conn.execute("SELECT to_regclass('public.sbtest1')").fetchone() == (None,)
    with pytest.raises(CommandError, match="No sysbench data set"):
        bench("run", name, *SYSBENCH_ON_DEFAULTDB, "--clients", "1", "--duration", "1")
