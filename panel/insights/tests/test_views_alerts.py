"""Alert rules on the Insights tab: add, replace, delete, inline errors, 404s, the firing banner."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.insights.models import AlertRule, AlertState
from panel.insights.templatetags.insights_ui import firing_alerts

RULE = {"kind": "cpu_percent", "threshold": "80", "duration_seconds": "300", "email": "", "enabled": "on"}


def alerts_url(cluster: Cluster) -> str:
    return reverse("insights:alerts", kwargs={"cluster_id": cluster.pk})


def delete_url(rule: AlertRule) -> str:
    return reverse("insights:alert-delete", kwargs={"cluster_id": rule.cluster_id, "rule_id": rule.pk})


@pytest.fixture
def rule(cluster_row: Cluster) -> AlertRule:
    return AlertRule.objects.create(
        cluster=cluster_row, kind="disk_percent", threshold=90, duration_seconds=60
    )


def test_outsiders_get_404_and_change_nothing(
    other_client: Client, cluster_row: Cluster, rule: AlertRule
) -> None:
    assert other_client.get(alerts_url(cluster_row)).status_code == 404
    assert other_client.post(alerts_url(cluster_row), RULE).status_code == 404
    assert other_client.post(delete_url(rule)).status_code == 404
    assert list(AlertRule.objects.values_list("kind", "threshold")) == [("disk_percent", 90.0)]


def test_the_owner_adds_a_rule_through_htmx(owner_client: Client, cluster_row: Cluster) -> None:
    response = owner_client.post(alerts_url(cluster_row), RULE, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="insights-alerts"' in html and "<html" not in html
    assert 'data-rule="cpu_percent"' in html and "saved" in html
    rule = AlertRule.objects.get(cluster=cluster_row)
    assert (rule.kind, rule.threshold, rule.duration_seconds, rule.enabled) == ("cpu_percent", 80, 300, True)


def test_saving_the_same_kind_replaces_the_rule(owner_client: Client, cluster_row: Cluster) -> None:
    owner_client.post(alerts_url(cluster_row), RULE)
    response = owner_client.post(alerts_url(cluster_row), {**RULE, "threshold": "95", "enabled": ""})
    assert response.status_code == 302
    rule = AlertRule.objects.get(cluster=cluster_row)
    assert (rule.threshold, rule.enabled) == (95, False)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"threshold": "150"}, "threshold", "Enter a percentage between 1 and 100."),
        (
            {"kind": "pool_waiting_clients", "threshold": "2.5"},
            "threshold",
            "Enter a whole number of clients",
        ),
        ({"threshold": "many"}, "threshold", "Enter a number."),
        ({"duration_seconds": "100000"}, "duration_seconds", "Enter a duration between 0 and 86400 seconds."),
        ({"email": "not-an-address"}, "email", "Enter a valid email address."),
    ],
)
def test_invalid_values_are_shown_inline_with_status_200(
    owner_client: Client, cluster_row: Cluster, change: dict[str, str], field: str, message: str
) -> None:
    response = owner_client.post(alerts_url(cluster_row), {**RULE, **change}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert message in html and 'class="invalid-feedback d-block"' in html
    assert f'id="id_{field}"' in html
    assert not AlertRule.objects.exists()


def test_host_alerts_are_not_offered_for_an_attached_server(
    owner_client: Client, cluster_row: Cluster
) -> None:
    cluster_row.kind = "attached"
    cluster_row.save(update_fields=["kind"])
    response = owner_client.post(alerts_url(cluster_row), RULE, headers={"HX-Request": "true"})
    assert response.status_code == 200 and not AlertRule.objects.exists()
    assert 'value="cpu_percent"' not in response.content.decode()


def test_edit_fills_the_form_and_delete_removes_the_rule(
    owner_client: Client, cluster_row: Cluster, rule: AlertRule
) -> None:
    html = owner_client.get(alerts_url(cluster_row), {"kind": "disk_percent"}).content.decode()
    assert 'name="threshold" value="90"' in html and 'name="duration_seconds" value="60"' in html
    response = owner_client.post(delete_url(rule), headers={"HX-Request": "true"})
    assert response.status_code == 200 and "deleted" in response.content.decode()
    assert not AlertRule.objects.exists()


def test_a_firing_rule_shows_a_banner_on_the_cluster_pages(
    owner_client: Client, cluster_row: Cluster, rule: AlertRule
) -> None:
    overview = reverse("clusters:detail", kwargs={"cluster_id": cluster_row.pk})
    assert "insights-alert-banner" not in owner_client.get(overview).content.decode()
    AlertState.objects.create(
        rule=rule, pending_since=timezone.now(), firing_since=timezone.now(), last_value=93.5
    )
    html = owner_client.get(overview).content.decode()
    assert "insights-alert-banner" in html and "1 alert firing" in html
    assert "Disk % at 93.5, at or above 90 for 60 s" in html
    tab = owner_client.get(reverse("insights:tab", kwargs={"cluster_id": cluster_row.pk})).content.decode()
    assert "insights-alert-banner" in tab and 'data-state="firing"' in tab


def test_the_banner_costs_one_query_and_ignores_disabled_or_quiet_rules(
    cluster_row: Cluster, rule: AlertRule
) -> None:
    now = timezone.now()
    AlertState.objects.create(rule=rule, pending_since=now, firing_since=now, last_value=93.5)
    quiet = AlertRule.objects.create(cluster=cluster_row, kind="cpu_percent", threshold=80)
    AlertState.objects.create(rule=quiet, pending_since=now, last_value=85)  # pending, not firing
    off = AlertRule.objects.create(
        cluster=cluster_row, kind="connections_percent", threshold=80, enabled=False
    )
    AlertState.objects.create(rule=off, pending_since=now, firing_since=now, last_value=99)
    # Every cluster page (and its 1 s poll while busy) renders the banner: one query, state included.
    with CaptureQueriesContext(connection) as captured:
        firing = firing_alerts(cluster_row)
        assert [(r.kind, r.state.last_value) for r in firing] == [("disk_percent", 93.5)]
    assert len(captured) == 1
