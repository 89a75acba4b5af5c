"""`manage.py bench …` on a real cluster, in the foreground."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from panel.clusters.models import Cluster

pytestmark = pytest.mark.integration


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
