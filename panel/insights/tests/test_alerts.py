"""Alert rules: validation, firing after the duration, one email per firing, resolving."""

from __future__ import annotations

import datetime as dt
import signal
import socket
import time

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext

from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.insights import services
from panel.insights.models import AlertKind, AlertState
from panel.insights.services import alerts
from panel.insights.tests.conftest import snapshot

NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=dt.UTC)


def at(seconds: int) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("kind", "threshold", "duration", "field"),
    [
        ("cpu_percent", 0, 60, "threshold"),
        ("cpu_percent", 101, 60, "threshold"),
        ("connections_percent", "lots", 60, "threshold"),
        ("pool_waiting_clients", 0, 60, "threshold"),
        ("pool_waiting_clients", 2.5, 60, "threshold"),
        ("pool_waiting_clients", "inf", 60, "threshold"),
        ("connections_percent", "nan", 60, "threshold"),
        ("cpu_percent", "1e400", 60, "threshold"),
        ("disk_percent", 90, "inf", "duration_seconds"),
        ("disk_percent", 90, "30.5", "duration_seconds"),
        ("disk_percent", 90, -1, "duration_seconds"),
        ("disk_percent", 90, 86401, "duration_seconds"),
        ("load", 1, 60, "kind"),
    ],
)
def test_invalid_rules_are_refused_with_the_field(
    cluster_row: Cluster, kind: str, threshold: object, duration: object, field: str
) -> None:
    with pytest.raises(ServiceError) as caught:
        services.save_rule(cluster_row, kind, threshold, duration)
    assert caught.value.field == field


def test_a_bad_email_is_refused(cluster_row: Cluster) -> None:
    with pytest.raises(ServiceError) as caught:
        services.save_rule(cluster_row, "cpu_percent", 80, 60, email="not an address")
    assert caught.value.field == "email"


def test_saving_a_rule_again_replaces_it(cluster_row: Cluster) -> None:
    services.save_rule(cluster_row, "disk_percent", 90, 60)
    rule = services.save_rule(cluster_row, "disk_percent", "95", "0")
    assert (rule.threshold, rule.duration_seconds) == (95.0, 0)
    assert cluster_row.alert_rules.count() == 1


def test_a_rule_fires_after_its_duration_emails_once_and_resolves(
    cluster_row: Cluster, mailoutbox: list[mail.EmailMessage]
) -> None:
    services.save_rule(cluster_row, "pool_waiting_clients", 5, 30)
    services.store(cluster_row, snapshot(at(0), pool_cl_waiting__test_pool=8))
    services.store(cluster_row, snapshot(at(15), pool_cl_waiting__test_pool=9))
    assert services.firing_alerts(cluster_row) == []  # true for 15 s of 30
    services.store(cluster_row, snapshot(at(30), pool_cl_waiting__test_pool=7))
    firing = services.firing_alerts(cluster_row)
    assert [r.kind for r in firing] == ["pool_waiting_clients"]
    assert firing[0].state.firing_since == at(30)
    event = cluster_row.events.get(kind="alert-firing")
    assert event.level == "warning" and "7.0" in event.message
    services.store(cluster_row, snapshot(at(45), pool_cl_waiting__test_pool=12))
    assert len(mailoutbox) == 1  # once per firing, not per collection
    assert mailoutbox[0].to == ["alice@example.com"]
    assert "db-metrics" in mailoutbox[0].subject

    services.store(cluster_row, snapshot(at(60)))  # PgBouncer not read: no data resolves nothing
    assert services.firing_alerts(cluster_row)
    services.store(cluster_row, snapshot(at(75), pool_cl_waiting__test_pool=0))
    assert services.firing_alerts(cluster_row) == []
    assert cluster_row.events.filter(kind="alert-resolved").count() == 1
    assert AlertState.objects.get().pending_since is None


def test_a_condition_that_clears_before_the_duration_never_fires(
    cluster_row: Cluster, mailoutbox: list[mail.EmailMessage]
) -> None:
    services.save_rule(cluster_row, "connections_percent", 80, 60, email="ops@example.com")
    services.store(cluster_row, snapshot(at(0), conn_percent=90))
    services.store(cluster_row, snapshot(at(45), conn_percent=20))
    services.store(cluster_row, snapshot(at(90), conn_percent=95))
    assert services.firing_alerts(cluster_row) == []
    assert mailoutbox == []
    services.store(cluster_row, snapshot(at(150), conn_percent=95))
    assert len(mailoutbox) == 1 and mailoutbox[0].to == ["ops@example.com"]


def test_a_zero_duration_fires_at_once_and_a_disabled_rule_never(
    cluster_row: Cluster, mailoutbox: list[mail.EmailMessage]
) -> None:
    services.save_rule(cluster_row, "cpu_percent", 50, 0)
    services.save_rule(cluster_row, "disk_percent", 50, 0, enabled=False)
    services.store(cluster_row, snapshot(at(0), cpu_percent=75, disk_percent=99))
    assert [r.kind for r in services.firing_alerts(cluster_row)] == ["cpu_percent"]
    assert len(mailoutbox) == 1


def test_evaluating_rules_costs_a_constant_number_of_queries(cluster_row: Cluster) -> None:
    for kind in ("cpu_percent", "disk_percent", "connections_percent", "pool_waiting_clients"):
        services.save_rule(cluster_row, kind, 95, 60)
    values = {("cpu_percent", ""): 1.0, ("disk_percent", ""): 1.0, ("conn_percent", ""): 1.0}
    alerts.evaluate_alerts(cluster_row, values, at(0))  # creates the states
    with CaptureQueriesContext(connection) as captured:
        alerts.evaluate_alerts(cluster_row, values, at(15))
    # The rules with their states, then one UPDATE per rule that had a figure: no SELECT per rule.
    assert len(captured) == 1 + 3, [q["sql"] for q in captured]
    assert AlertState.objects.filter(evaluated_at=at(15)).count() == 3


def test_a_mail_server_that_never_answers_is_given_up_and_recorded(
    cluster_row: Cluster, settings: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as silent:  # accepts the connection, never sends SMTP's greeting
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # type: ignore[attr-defined]
        settings.EMAIL_HOST, settings.EMAIL_PORT = silent.getsockname()  # type: ignore[attr-defined]
        monkeypatch.setattr(alerts, "EMAIL_TIMEOUT_SECONDS", 0.5)
        services.save_rule(cluster_row, "cpu_percent", 50, 0)

        def hung(*_args: object) -> None:
            raise AssertionError("the email was not given up: storing hangs on a silent mail server")

        previous = signal.signal(signal.SIGALRM, hung)  # fail, not hang, if the timeout regresses
        signal.alarm(10)
        try:
            started = time.monotonic()
            services.store(cluster_row, snapshot(at(0), cpu_percent=75))
            took = time.monotonic() - started
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    assert took < 3
    assert [r.kind for r in services.firing_alerts(cluster_row)] == ["cpu_percent"]
    assert AlertState.objects.get().last_notified_at is None
    event = cluster_row.events.get(kind="alert-email", level="error")
    # The socket's words ("timed out") are the log's; the event says where to look (issue 38).
    assert event.shown == (
        "Could not send the alert email: the panel's log holds the details for an administrator"
    )


def test_the_alert_email_is_in_the_owners_language(
    cluster_row: Cluster, mailoutbox: list[mail.EmailMessage]
) -> None:
    """Issue 18: the email goes out in the language the owner chose in the header's menu, whatever
    language the collecting process runs in (English); the event stays readable in both."""
    from django.utils import translation

    from panel.accounts.services import set_account_language

    set_account_language(cluster_row.owner, "de")
    services.save_rule(cluster_row, "pool_waiting_clients", 5, 0)
    with translation.override("en"):
        services.store(cluster_row, snapshot(at(0), pool_cl_waiting__test_pool=8))
        services.store(cluster_row, snapshot(at(15), pool_cl_waiting__test_pool=9))
    [email] = mailoutbox
    assert "Warnung" in email.subject or "Alarm" in email.subject, email.subject
    assert "alert" not in email.subject
    with translation.override("de"):
        german_kind = str(AlertKind("pool_waiting_clients").label)
    assert german_kind in email.body and "Clients waiting" not in email.body
