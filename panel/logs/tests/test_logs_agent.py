"""The Logs tab from a web process: the node agent (a real Celery worker) reads the files and
sends the entries back; the web process itself opens none."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import psycopg
import pytest
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import connect_as_client
from panel.logs.lib import logfile
from tests.test_node_agent import agent_worker, calls_served

pytestmark = pytest.mark.integration
__all__ = ["agent_worker"]  # the fixture, imported for this module's tests


def test_the_web_reads_the_log_through_the_agent(
    local_cluster: Cluster, agent_worker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_files_here(*args: object, **kwargs: object) -> None:
        raise AssertionError("the web process read a cluster's log file")

    monkeypatch.setattr(logfile, "read_tail", no_files_here)
    client = Client()
    client.force_login(local_cluster.owner)
    with connect_as_client(local_cluster) as conn, contextlib.suppress(psycopg.Error):
        conn.execute("SELECT 1/0 AS agent_marker")
    tab = reverse("logs:tab", args=[local_cluster.pk])
    deadline = time.monotonic() + 15
    while "agent_marker" not in (html := client.get(tab, {"level": "ERROR"}).content.decode()):
        assert time.monotonic() < deadline, html[-2000:]
        time.sleep(0.3)
    assert "division by zero" in html
    download = client.get(reverse("logs:download", args=[local_cluster.pk]))
    assert b"agent_marker" in download.content
    assert calls_served(agent_worker, 2) >= 2
