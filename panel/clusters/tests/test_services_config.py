"""The owner's PostgreSQL settings on a real cluster: a change shows in a new client session
without a restart, a refused one changes nothing, and nothing outside the list can be set."""

from __future__ import annotations

import io
from collections.abc import Iterator

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from panel.clusters import services
from panel.clusters.engine import postgres
from panel.clusters.models import Cluster
from panel.clusters.services import config
from panel.clusters.services.provision import SETTINGS_FILE
from panel.clusters.tests.conftest import connect_as_client, refreshed_fixture
from panel.core.errors import ServiceError
from tests.fixtures.clusters import module_cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    """One real cluster for the module; each test sets what it checks."""
    with module_cluster(django_db_blocker, "cfg-owner", "cfg-test") as made:
        yield made


def show(cluster: Cluster, name: str) -> str:
    """SHOW from a new client session: doadmin over TCP and TLS, as a tenant's application."""
    with connect_as_client(cluster) as conn:
        return conn.execute(f"SHOW {name}").fetchone()[0]


fresh = refreshed_fixture("cluster")


def test_work_mem_reaches_a_new_session_without_a_restart(fresh: Cluster) -> None:
    pid = postgres.postmaster_pid(fresh.pgdata)
    values = config.update_config(fresh, {"work_mem": 24, "timezone": "Europe/Paris"})
    assert values["work_mem"] == 24 and values["timezone"] == "Europe/Paris"
    assert show(fresh, "work_mem") == "24MB"
    assert show(fresh, "TimeZone") == "Europe/Paris"
    assert postgres.postmaster_pid(fresh.pgdata) == pid  # reloaded, not restarted
    fresh.refresh_from_db()
    assert fresh.config["work_mem"] == 24
    assert fresh.events.filter(kind="config-changed", message__contains="work_mem = 24 MB").exists()
    # A restart writes panel.conf again and keeps the owner's settings.
    services.perform_action(fresh, "restart")
    assert show(fresh, "work_mem") == "24MB"


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"work_mem": "lots"}, "work_mem: must be a whole number"),
        ({"work_mem": 4096}, "between 1 and 1024"),
        ({"work_mem": 8, "jit": "maybe"}, "jit: must be true or false"),
        ({"work_mem": 8, "max_connections": 5000}, "max_connections"),
    ],
)
def test_a_refused_change_changes_nothing(fresh: Cluster, changes: dict, words: str) -> None:
    before_row = dict(fresh.config)
    before_file = (fresh.pgdata / SETTINGS_FILE).read_text()
    before_show = show(fresh, "work_mem")
    with pytest.raises(ServiceError) as refused:
        config.update_config(fresh, changes)
    assert words in refused.value.message
    fresh.refresh_from_db()
    assert fresh.config == before_row
    assert (fresh.pgdata / SETTINGS_FILE).read_text() == before_file
    assert show(fresh, "work_mem") == before_show


def test_doadmin_cannot_reach_past_the_list(fresh: Cluster) -> None:
    # Through the panel: only listed names, and values that cannot carry another line.
    for changes in (
        {"shared_preload_libraries": "pg_stat_statements"},
        {"timezone": "UTC'\nlisten_addresses = '*"},
        {"ssl": False},
    ):
        with pytest.raises(ServiceError):
            config.update_config(fresh, changes)
    assert "listen_addresses" not in (fresh.pgdata / SETTINGS_FILE).read_text()
    # In SQL: the server-wide configuration is not the tenant's to write.
    with connect_as_client(fresh) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'x'")
    assert show(fresh, "max_connections") == str(fresh.max_connections)


def test_the_card_saves_only_what_changed(fresh: Cluster) -> None:
    client = Client()
    client.force_login(fresh.owner)
    url = reverse("clusters:config", args=[fresh.pk])
    form = {name: str(value) for name, value in config.current_config(fresh).items()}
    response = client.post(
        url, {**form, "idle_in_transaction_session_timeout": "60000"}, headers={"HX-Request": "true"}
    )
    assert "Configuration saved" in response.content.decode()
    assert show(fresh, "idle_in_transaction_session_timeout") == "1min"
    fresh.refresh_from_db()
    assert "idle_in_transaction_session_timeout" in fresh.config and "deadlock_timeout" not in fresh.config


def test_the_command_prints_and_sets(fresh: Cluster) -> None:
    out = io.StringIO()
    call_command(
        "cluster", "config", fresh.name, "--set", "statement_timeout=1500", "--set", "jit=off", stdout=out
    )
    assert show(fresh, "statement_timeout") == "1500ms"
    assert show(fresh, "jit") == "off"
    printed = out.getvalue()
    assert "statement_timeout" in printed and "1500 ms" in printed
    assert "deadlock_timeout                      1000 ms  (default)" in printed
    with pytest.raises(CommandError, match="between 500"):
        call_command("cluster", "config", fresh.name, "--set", "deadlock_timeout=10", stdout=io.StringIO())


def test_a_server_stopped_behind_the_panels_back_is_said_without_libpqs_words(
    fresh: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 38: libpq's refusal (``connection to server on socket "/…/.s.PGSQL.N" failed``) was
    the form's error and the event's reason."""
    from django.conf import settings

    from panel.clusters.engine import isolation

    user = isolation.os_user(fresh)
    postgres.stop(fresh.version, fresh.pgdata, user=user, timeout=settings.PANEL_COMMAND_TIMEOUT)
    try:
        with pytest.raises(ServiceError) as refused:
            config.update_config(fresh, {"work_mem": 8})
    finally:
        isolation.start_server(fresh, user, settings.PANEL_COMMAND_TIMEOUT)
    assert refused.value.code == "config.not_applied"
    assert refused.value.message == (
        "The configuration was not changed: the panel's log holds the details for an administrator"
    )
    event = fresh.events.filter(kind="config-failed").latest("id")
    for shown in (refused.value.message, event.shown, event.message):
        assert str(fresh.data_root) not in shown and ".s.PGSQL" not in shown, shown
    assert str(fresh.data_root) in caplog.text  # the words, for an administrator

    # Beside it, the server back: the same change goes through.
    assert config.update_config(fresh, {"work_mem": 8})["work_mem"] == 8
    assert show(fresh, "work_mem") == "8MB"
