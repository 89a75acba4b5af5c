"""`manage.py insights`: token, prune, and collect of a cluster that is not serving."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from panel.clusters.models import Cluster
from panel.insights.models import MetricPoint


def run(*args: str) -> str:
    out = StringIO()
    call_command("insights", *args, stdout=out)
    return out.getvalue()


def test_token_prints_the_metrics_token(settings: object) -> None:
    settings.PANEL_METRICS_TOKEN = "tok-123"  # type: ignore[attr-defined]
    assert run("token").strip() == "tok-123"


def test_prune_reports_what_it_did(db: None) -> None:
    assert "rollups built: 0" in run("prune")


def test_collect_of_a_stopped_cluster_records_a_gap(cluster_row: Cluster) -> None:
    cluster_row.mark("stopped")
    out = run("collect", "db-metrics")
    assert "postgres down: the cluster is stopped" in out
    assert MetricPoint.objects.get(cluster=cluster_row, metric="up", labels="source=postgres").value == 0


def test_collect_of_an_unknown_cluster_fails(db: None) -> None:
    with pytest.raises(CommandError):
        run("collect", "nope")
