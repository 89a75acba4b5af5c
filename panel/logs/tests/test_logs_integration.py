"""The Logs tab on a real cluster: a tenant's error shows within seconds and the search finds it,
the live tail returns what came after a cursor, the download is the owner's only, PgBouncer's log
is the pooler source; and the panel's own statements (a password change) never reach a tenant."""

from __future__ import annotations

import contextlib
import io
import re
import time
from collections.abc import Callable

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster, credentials
from panel.clusters.services import config, roles
from panel.clusters.tests.conftest import connect_as_client, module_cluster_fixture
from panel.logs import services
from panel.pools import services as pools
from tests.fixtures.people import poll_until

pytestmark = pytest.mark.integration

POLL_SECONDS = 10


cluster = module_cluster_fixture("logs-owner", "logs-test")


@pytest.fixture
def fresh(cluster: Cluster, db: None) -> Cluster:
    cluster.refresh_from_db()
    return cluster


@pytest.fixture
def owner_of(fresh: Cluster) -> Client:
    client = Client()
    client.force_login(fresh.owner)
    return client


def poll(predicate: Callable[[], object], what: str) -> object:
    """``predicate``'s first truthy answer within POLL_SECONDS (the logging collector writes
    asynchronously), or the test fails saying ``what``."""
    return poll_until(predicate, timeout=POLL_SECONDS, message=what)


def tenant_runs(cluster: Cluster, statement: str) -> None:
    """``statement`` as doadmin over TCP and TLS, as a tenant's application; errors are expected."""
    with connect_as_client(cluster) as conn, contextlib.suppress(psycopg.Error):
        conn.execute(statement)


def test_a_tenants_error_shows_within_seconds_and_search_finds_it(
    fresh: Cluster, owner_of: Client, other_client: Client
) -> None:
    before = services.read_log(fresh).cursor
    tenant_runs(fresh, "SELECT 1/0 AS logs_test_marker")
    tab = reverse("logs:tab", args=[fresh.pk])

    def page_shows() -> str:
        html = owner_of.get(tab, {"source": "postgres", "level": "ERROR", "q": "division"}).content.decode()
        return html if "division by zero" in html else ""

    html = str(poll(page_shows, "the ERROR on the Logs tab"))
    # The ERROR and its STATEMENT are one entry, shown newest first.
    entry = re.search(r'<article class="log-entry log-level-error".*?</article>', html, re.S)
    assert entry is not None
    assert "division by zero" in entry.group(0) and "SELECT 1/0 AS logs_test_marker" in entry.group(0)
    assert "doadmin@defaultdb" in entry.group(0)
    # The server's start lines name its socket directory: not where the panel keeps it.
    assert "listening on Unix socket" in owner_of.get(tab, {"q": "socket"}).content.decode()
    assert str(fresh.data_root) not in owner_of.get(tab).content.decode()
    # A search for another word does not show it; the HTMX partial carries the same results.
    assert "division by zero" not in owner_of.get(tab, {"q": "no-such-words-here"}).content.decode()
    partial = owner_of.get(
        tab, {"q": "logs_test_marker"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="log-results"
    )
    assert "division by zero" in partial.content.decode() and "<html" not in partial.content.decode()

    # The live tail returns it after the cursor from before, and nothing once past it.
    tail = reverse("logs:tail", args=[fresh.pk])
    after = owner_of.get(tail, {"after": before}).content.decode()
    assert "division by zero" in after and 'hx-swap-oob="afterbegin:#log-entries"' in after
    cursor = re.search(r"after=([0-9]+%3A[0-9]+|[0-9]+:[0-9]+)", after)
    assert cursor is not None
    again = owner_of.get(tail + "?after=" + cursor.group(1)).content.decode()
    assert "division by zero" not in again and 'hx-trigger="every' in again
    paused = owner_of.get(tail, {"after": before, "paused": "1"}).content.decode()
    assert "division by zero" not in paused and "hx-trigger" not in paused and "Resume" in paused

    # The download is the owner's; anybody else gets a 404, as for the tab and the tail.
    download = owner_of.get(reverse("logs:download", args=[fresh.pk]), {"source": "postgres"})
    assert download.status_code == 200
    assert download["Content-Disposition"].startswith("attachment")
    assert b"division by zero" in download.content
    for name in ("logs:download", "logs:tab", "logs:tail"):
        assert other_client.get(reverse(name, args=[fresh.pk])).status_code == 404


def test_the_pooler_source_shows_pgbouncers_log(fresh: Cluster, owner_of: Client) -> None:
    pool = pools.create_pool(fresh, "logs-pool", "defaultdb", None, "transaction", 2)
    try:
        # PgBouncer logs no successful login (log_connections = 0), but every refused one.
        details = pools.pool_connection_details(pool)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(details.uri().replace(details.password, "not-the-password"), connect_timeout=5)
        tab = reverse("logs:tab", args=[fresh.pk])

        def shows_refusal() -> str:
            html = owner_of.get(tab, {"source": "pooler", "q": "logs-pool/doadmin"}).content.decode()
            return html if "logs-pool/doadmin" in html and "password authentication failed" in html else ""

        html = str(poll(shows_refusal, "PgBouncer's refused login on the pooler source"))
        assert "pgbouncer.log" in html
        # The panel's own admin-console sessions (user pgbouncer) are never shown.
        everything = services.read_log(fresh, "pooler", limit=2000)
        assert everything.entries
        assert not any("/pgbouncer@" in entry.text for entry in everything.entries)
        download = owner_of.get(reverse("logs:download", args=[fresh.pk]), {"source": "pooler"})
        assert b"logs-pool/doadmin" in download.content and b"pgbouncer/pgbouncer@" not in download.content
    finally:
        pools.delete_pool(pool)


def test_the_panels_password_change_never_reaches_the_tenant(fresh: Cluster, owner_of: Client) -> None:
    """The replay: the owner logs every statement, then the panel changes a role's password."""
    config.update_config(fresh, {"log_min_duration_statement": 0})
    try:
        user = roles.add_user(fresh, "logs_app")
        user = roles.reset_password(fresh, "logs_app")
        verifier = ""
        with dbconn.admin_connection(fresh) as conn:
            row = conn.execute(
                "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = 'logs_app'"
            ).fetchone()
            verifier = row[0]
        # The tenant's own slow statement (any statement, at 0 ms) does show.
        tenant_runs(fresh, "SELECT 'tenant-slow-marker'")
        tab = reverse("logs:tab", args=[fresh.pk])

        def shows_tenant() -> str:
            html = owner_of.get(tab, {"q": "tenant-slow-marker"}).content.decode()
            return html if "duration:" in html else ""

        poll(shows_tenant, "the tenant's statement with its duration")
        # A session of the panel's superuser that did not ask for a quiet log (none of the
        # panel's does now): its statement is in the file, and still hidden from the tenant.
        with dbconn.connect(
            host=str(fresh.socket_dir),
            port=fresh.port,
            user=settings.PANEL_SUPERUSER,
            password=credentials.superuser_password(fresh),
            dbname="postgres",
        ) as conn:
            conn.execute("SELECT 'panel-session-marker'")
        raw_path = fresh.log_file
        poll(lambda: "panel-session-marker" in raw_path.read_text(), "the superuser's statement in the file")

        raw = raw_path.read_text()
        # The panel's own sessions logged no statement: not the password change, not the reads.
        assert "ALTER ROLE" not in raw
        assert verifier not in raw and user.password not in raw
        shown = services.read_log(fresh, limit=2000)
        text = "\n".join(entry.text for entry in shown.entries)
        assert "tenant-slow-marker" in text
        assert "panel-session-marker" not in text
        assert f"{settings.PANEL_SUPERUSER}@" not in text and f"{settings.PANEL_MONITOR_ROLE}@" not in text
        for secret in (
            verifier,
            user.password,
            credentials.superuser_password(fresh),
            credentials.monitor_password(fresh),
        ):
            assert secret not in text
            assert secret not in owner_of.get(tab).content.decode()
            assert secret not in owner_of.get(reverse("logs:download", args=[fresh.pk])).content.decode()
        # Searching for the hidden statement finds nothing either.
        assert "panel-session-marker" not in owner_of.get(tab, {"q": "panel-session"}).content.decode()

        # The tenant's own password statement shows, its literal redacted.
        tenant_runs(fresh, "ALTER ROLE logs_app PASSWORD 'tenant-own-secret-123'")
        poll(lambda: "tenant-own-secret-123" in raw_path.read_text(), "the tenant's ALTER ROLE in the file")
        text = "\n".join(entry.text for entry in services.read_log(fresh, search="logs_app").entries)
        assert "ALTER ROLE logs_app PASSWORD '[redacted]'" in text and "tenant-own-secret-123" not in text
    finally:
        config.update_config(fresh, {"log_min_duration_statement": -1})


def test_the_slow_query_card_changes_the_setting_through_the_configuration_service(
    fresh: Cluster, owner_of: Client
) -> None:
    url = reverse("logs:slow-queries", args=[fresh.pk])
    response = owner_of.post(url, {"log_min_duration_statement": "250"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "250 ms" in response.content.decode()
    fresh.refresh_from_db()
    assert fresh.config["log_min_duration_statement"] == 250
    with connect_as_client(fresh) as conn:
        assert conn.execute("SHOW log_min_duration_statement").fetchone()[0] == "250ms"
    assert fresh.events.filter(kind="config-changed", message__contains="log_min_duration_statement").exists()
    refused = owner_of.post(url, {"log_min_duration_statement": "-5"}, HTTP_HX_REQUEST="true")
    assert refused.status_code == 200 and "invalid-feedback" in refused.content.decode()
    fresh.refresh_from_db()
    assert fresh.config["log_min_duration_statement"] == 250
    config.update_config(fresh, {"log_min_duration_statement": -1})


def test_the_command_prints_and_filters(fresh: Cluster) -> None:
    tenant_runs(fresh, "SELECT 1/0 AS command_marker")
    out = io.StringIO()

    def printed() -> str:
        out.seek(0)
        out.truncate()
        call_command(
            "logs", fresh.name, "--level", "ERROR", "--search", "command_marker", "--lines", "5", stdout=out
        )
        return out.getvalue()

    text = str(poll(lambda: "command_marker" in printed() and out.getvalue(), "the error in manage.py logs"))
    assert "ERROR:  division by zero" in text and "STATEMENT:  SELECT 1/0 AS command_marker" in text


def test_the_command_follows_until_interrupted(fresh: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """--follow prints what is written after its first read; Ctrl-C ends it quietly."""
    from panel.logs.management.commands import logs as command

    out = io.StringIO()
    naps = []

    def nap() -> None:
        naps.append(1)
        if len(naps) == 1:  # after the first read: a new error, once it is in the file
            tenant_runs(fresh, "SELECT 1/0 AS follow_marker")
            poll(lambda: "follow_marker" in fresh.log_file.read_text(), "the error in the file")
        elif "follow_marker" in out.getvalue() or len(naps) > 50:
            raise KeyboardInterrupt
        else:
            time.sleep(0.1)

    monkeypatch.setattr(command, "pause", nap)
    call_command("logs", fresh.name, "--follow", "--lines", "1", "--search", "follow_marker", stdout=out)
    text = out.getvalue()
    assert text.count("ERROR:  division by zero") == 1 and "STATEMENT:  SELECT 1/0 AS follow_marker" in text
    assert len(naps) == 2  # printed by the first read after the nap, then interrupted
