"""The Logs tab's pages without a running server: who may see them, an attached server, a
cluster whose log does not exist yet, the filters' defaults, and the page crossing to the node
agent and back."""

from __future__ import annotations

import json
import shutil

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster, ClusterKind
from panel.clusters.tests.conftest import make_cluster_row
from panel.core import agent
from panel.core.errors import ServiceError
from panel.logs import services
from panel.logs.lib.logfile import LogEntry


@pytest.fixture
def cluster(owner: User) -> Cluster:
    return make_cluster_row(owner)


def test_outsiders_get_404_on_every_logs_url(cluster: Cluster, other_client: Client) -> None:
    for name in ("logs:tab", "logs:tail", "logs:download", "logs:slow-queries"):
        assert other_client.get(reverse(name, args=[cluster.pk])).status_code == 404
    response = other_client.post(
        reverse("logs:slow-queries", args=[cluster.pk]), {"log_min_duration_statement": 0}
    )
    assert response.status_code == 404
    cluster.refresh_from_db()
    assert "log_min_duration_statement" not in cluster.config


def test_anonymous_users_are_sent_to_login(cluster: Cluster) -> None:
    response = Client().get(reverse("logs:download", args=[cluster.pk]))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_cluster_without_a_log_yet_shows_an_empty_tab(cluster: Cluster, owner_client: Client) -> None:
    html = owner_client.get(reverse("logs:tab", args=[cluster.pk])).content.decode()
    assert "The log is empty so far." in html
    assert 'aria-current="page" href="{}"'.format(reverse("logs:tab", args=[cluster.pk])) in html
    assert "Slow-query logging" in html and "log_min_duration_statement</code> = -1" in html
    pooler = owner_client.get(reverse("logs:tab", args=[cluster.pk]), {"source": "pooler", "level": "PANIC"})
    # PANIC is not one of PgBouncer's levels: the filter falls back to every level.
    assert "The log is empty so far." in pooler.content.decode()


def test_an_attached_server_says_where_its_log_is(owner: User, owner_client: Client) -> None:
    attached = make_cluster_row(owner, name="attached", kind=ClusterKind.EXTERNAL)
    html = owner_client.get(reverse("logs:tab", args=[attached.pk])).content.decode()
    assert "keeps its log where it runs" in html
    download = owner_client.get(reverse("logs:download", args=[attached.pk]))
    assert download.status_code == 400


def test_an_unknown_source_or_level_is_refused_by_the_service(cluster: Cluster) -> None:
    with pytest.raises(ServiceError, match="Unknown log source"):
        services.read_log(cluster, "kernel")
    with pytest.raises(ServiceError, match="Unknown level"):
        services.read_log(cluster, "pooler", level="PANIC")


def test_a_page_crosses_to_the_node_agent_and_back() -> None:
    entry = LogEntry("postgresql.log", 12, "2026-01-01 00:00:00.000 UTC", "7", "ERROR", "doadmin", "db")
    entry.lines += ["… ERROR:  division by zero", "… STATEMENT:  SELECT 1/0"]
    entry.levels += ["ERROR", "STATEMENT"]
    page = services.LogPage("postgres", [entry], "1:2", older_not_read=True, files=["postgresql.log"])
    assert agent.decode(agent.encode(page)) == page


def record(pid: int, severity: str, message: str, user: str = "", dbname: str = "") -> bytes:
    """One line of PostgreSQL's jsonlog (only the fields the reader needs; empty ones left out)."""
    fields = {"timestamp": "2026-01-01 00:00:00.000 UTC", "user": user, "dbname": dbname, "pid": pid}
    fields |= {"error_severity": severity, "message": message}
    return (json.dumps({key: value for key, value in fields.items() if value != ""}) + "\n").encode()


def write_log(cluster: Cluster, text: bytes) -> None:
    path = services.json_log_file(cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text)


def test_a_log_larger_than_a_read_says_older_lines_were_not_read(
    cluster: Cluster, owner_client: Client
) -> None:
    line = record(9, "LOG", "filler line to grow the log file", "doadmin", "defaultdb")
    first = record(9, "ERROR", "the oldest error", "doadmin", "defaultdb")
    write_log(cluster, first + line * (services.READ_CAP_BYTES // len(line) + 10))
    try:
        html = owner_client.get(reverse("logs:tab", args=[cluster.pk])).content.decode()
        assert 'id="log-older-not-read"' in html and "older lines are not shown" in html
        assert html.count('class="log-entry') == services.DEFAULT_ENTRIES
        assert (
            "the oldest error"
            not in owner_client.get(reverse("logs:tab", args=[cluster.pk]), {"q": "oldest"}).content.decode()
        )
        # The download reaches further back (its own, larger cap), whole.
        download = owner_client.get(reverse("logs:download", args=[cluster.pk])).content
        assert b"the oldest error" in download and not download.startswith(b"#")
    finally:
        shutil.rmtree(cluster.data_root)


def test_what_the_panel_logged_is_hidden_and_secrets_redacted_on_the_page(
    cluster: Cluster, owner_client: Client
) -> None:
    superuser = "pgpanel"
    write_log(
        cluster,
        record(9, "LOG", "statement: ALTER ROLE x PASSWORD 'SCRAM-SHA-256$4096:a$b:c'", superuser, "postgres")
        + record(10, "LOG", "statement: CREATE ROLE y PASSWORD 'mine-own-secret'", "doadmin", "defaultdb")
        + record(10, "LOG", "statement: SELECT 'admin-secret-Zq7xK2'", "doadmin", "defaultdb"),
    )
    try:
        html = owner_client.get(reverse("logs:tab", args=[cluster.pk])).content.decode()
        assert "ALTER ROLE x" not in html and "SCRAM-SHA-256" not in html
        assert "CREATE ROLE y PASSWORD &#x27;[redacted]&#x27;" in html and "mine-own-secret" not in html
        # The tenant's own password (shown in its connection details) is not the panel's secret.
        assert "admin-secret-Zq7xK2" in html
    finally:
        shutil.rmtree(cluster.data_root)


def test_the_tail_of_a_log_that_appears_later_brings_its_entries_once(
    cluster: Cluster, owner_client: Client
) -> None:
    html = owner_client.get(reverse("logs:tab", args=[cluster.pk])).content.decode()
    assert "after=0%3A0" in html
    tail = reverse("logs:tail", args=[cluster.pk])
    assert "log-entry" not in owner_client.get(tail, {"after": "0:0"}).content.decode()
    write_log(cluster, record(9, "LOG", "database system is ready to accept connections"))
    try:
        first = owner_client.get(tail, {"after": "0:0"}).content.decode()
        assert first.count('class="log-entry') == 1 and "ready to accept connections" in first
        cursor = first.split("after=", 1)[1].split('"', 1)[0].split("&", 1)[0].replace("%3A", ":")
        assert "log-entry" not in owner_client.get(tail, {"after": cursor}).content.decode()
    finally:
        shutil.rmtree(cluster.data_root)
