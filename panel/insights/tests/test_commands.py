"""`manage.py insights`: token, prune, collect of a cluster that is not serving, alert rules, and
finding a cluster by name."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.clusters.services import transitions
from panel.clusters.tests.conftest import make_cluster_row
from panel.insights import services
from panel.insights.models import AlertRule, MetricPoint
from panel.insights.tests.conftest import snapshot


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
    transitions.mark(cluster_row, "stopped")
    out = run("collect", "db-metrics")
    assert "postgres down: the cluster is stopped" in out
    assert MetricPoint.objects.get(cluster=cluster_row, metric="up", labels="source=postgres").value == 0


def test_collect_of_an_unknown_cluster_fails(db: None) -> None:
    with pytest.raises(CommandError):
        run("collect", "nope")


def test_prune_help_names_every_rollup_tier(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("insights", "prune", "--help")
    assert "1-minute, 5-minute, hourly and 4-hour rollups" in " ".join(capsys.readouterr().out.split())


# --- alert rules ---------------------------------------------------------------------------------


def test_alert_adds_a_rule_then_replaces_it(cluster_row: Cluster) -> None:
    out = run("alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "80")
    assert "Added the cpu_percent alert of db-metrics: CPU % at or above 80 for 300 s" in out
    assert "email to the owner (alice@example.com)" in out
    out = run(
        "alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "92.5", "--duration", "60",
        "--email", "ops@example.com", "--disable",
    )  # fmt: skip
    assert "Replaced the cpu_percent alert of db-metrics" in out
    assert "email to ops@example.com, disabled." in out
    rule = AlertRule.objects.get(cluster=cluster_row)
    assert (rule.kind, rule.threshold, rule.duration_seconds) == ("cpu_percent", 92.5, 60)
    assert (rule.email, rule.enabled) == ("ops@example.com", False)


@pytest.mark.parametrize(
    ("kind", "threshold", "message"),
    [
        ("cpu_percent", "0", "Enter a percentage between 1 and 100. (--threshold)"),
        ("disk_percent", "150", "Enter a percentage between 1 and 100. (--threshold)"),
        ("connections_percent", "lots", "Enter a number. (--threshold)"),
        ("pool_waiting_clients", "2.5", "Enter a whole number of clients, at least 1. (--threshold)"),
    ],
)
def test_a_bad_threshold_is_refused_with_the_service_message_and_nothing_saved(
    cluster_row: Cluster, kind: str, threshold: str, message: str
) -> None:
    with pytest.raises(CommandError) as caught:
        run("alert", "db-metrics", "--kind", kind, "--threshold", threshold)
    assert str(caught.value) == message
    assert not AlertRule.objects.exists()


def test_a_bad_replacement_leaves_the_rule_as_it_was(cluster_row: Cluster) -> None:
    run("alert", "db-metrics", "--kind", "disk_percent", "--threshold", "90")
    with pytest.raises(CommandError, match=r"between 0 and 86400 seconds. \(--duration\)"):
        run("alert", "db-metrics", "--kind", "disk_percent", "--threshold", "95", "--duration", "-1")
    with pytest.raises(CommandError, match=r"Enter a valid email address. \(--email\)"):
        run("alert", "db-metrics", "--kind", "disk_percent", "--threshold", "95", "--email", "nobody")
    rule = AlertRule.objects.get()
    assert (rule.threshold, rule.duration_seconds, rule.email) == (90.0, 300, "")


def test_an_unknown_kind_or_a_missing_threshold_is_refused(cluster_row: Cluster) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'load'"):
        run("alert", "db-metrics", "--kind", "load", "--threshold", "1")
    with pytest.raises(CommandError, match="--threshold"):
        run("alert", "db-metrics", "--kind", "cpu_percent")
    assert not AlertRule.objects.exists()


def test_host_alerts_are_refused_for_an_attached_cluster(owner: User) -> None:
    make_cluster_row(owner, name="legacy", kind="external", pooler_port=None)
    with pytest.raises(CommandError, match=r"only for clusters provisioned here. \(--kind\)"):
        run("alert", "legacy", "--kind", "disk_percent", "--threshold", "90")
    assert "Added" in run("alert", "legacy", "--kind", "connections_percent", "--threshold", "90")


def test_alert_delete_removes_the_rule_and_fails_when_there_is_none(cluster_row: Cluster) -> None:
    run("alert", "db-metrics", "--kind", "pool_waiting_clients", "--threshold", "5")
    assert "Deleted the pool_waiting_clients alert of db-metrics." in run(
        "alert", "db-metrics", "--kind", "pool_waiting_clients", "--delete"
    )
    assert not AlertRule.objects.exists()
    with pytest.raises(CommandError, match="db-metrics has no pool_waiting_clients alert."):
        run("alert", "db-metrics", "--kind", "pool_waiting_clients", "--delete")


def test_alert_delete_takes_no_threshold(cluster_row: Cluster) -> None:
    run("alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "80")
    with pytest.raises(CommandError, match="--delete takes no"):
        run("alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "90", "--delete")
    assert AlertRule.objects.get().threshold == 80.0


def test_alerts_lists_rules_with_where_each_stands(cluster_row: Cluster) -> None:
    services.save_rule(cluster_row, "connections_percent", 50, 0)  # 56% now: fires at once
    services.save_rule(cluster_row, "cpu_percent", 20, 300, email="ops@example.com")  # 23.4%: pending
    services.save_rule(cluster_row, "disk_percent", 90, 60)  # 41%: ok
    at = timezone.now() - dt.timedelta(seconds=5)
    services.store(cluster_row, snapshot(at, conn_percent=56.0, cpu_percent=23.4, disk_percent=41.0))
    services.save_rule(cluster_row, "pool_waiting_clients", 3, 30)  # saved after: no data yet
    since = f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
    lines = run("alerts", "db-metrics").splitlines()
    assert lines == [
        "KIND                  THRESHOLD  FOR    EMAIL                      ENABLED  STATE",
        f"connections_percent   50         0 s    owner (alice@example.com)  yes      firing since {since} (last 56.0)",
        f"cpu_percent           20         300 s  ops@example.com            yes      pending since {since} (last 23.4)",
        "disk_percent          90         60 s   owner (alice@example.com)  yes      ok (last 41.0)",
        "pool_waiting_clients  3          30 s   owner (alice@example.com)  yes      no data yet",
    ]


def test_alerts_shows_a_disabled_rule_without_state(cluster_row: Cluster) -> None:
    run("alert", "db-metrics", "--kind", "disk_percent", "--threshold", "90", "--disable")
    services.store(cluster_row, snapshot(timezone.now(), disk_percent=95.0))
    assert run("alerts", "db-metrics").splitlines()[1].split()[-2:] == ["no", "-"]


def test_alerts_of_a_cluster_without_rules_says_how_to_add_one(cluster_row: Cluster) -> None:
    out = run("alerts", "db-metrics")
    assert "No alert rules on db-metrics." in out
    assert "manage.py insights alert db-metrics --kind KIND --threshold X" in out


# --- finding the cluster ---------------------------------------------------------------------------


@pytest.mark.parametrize("subcommand", ["show", "alerts"])
def test_an_unknown_cluster_fails(db: None, subcommand: str) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nope'."):
        run(subcommand, "nope")


def test_an_unknown_cluster_fails_for_alert(db: None) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nope'."):
        run("alert", "nope", "--kind", "cpu_percent", "--threshold", "80")


def test_a_name_two_users_share_needs_owner(cluster_row: Cluster, other_user: User) -> None:
    theirs = make_cluster_row(other_user, name="db-metrics", port=26910, pooler_port=26911)
    for args in (
        ["show", "db-metrics"],
        ["alerts", "db-metrics"],
        ["alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "80"],
        ["collect", "db-metrics"],
    ):
        with pytest.raises(CommandError, match=r"\(alice, bob\); choose one with --owner USERNAME"):
            run(*args)
    assert not AlertRule.objects.exists()
    run("alert", "db-metrics", "--kind", "cpu_percent", "--threshold", "80", "--owner", "bob")
    assert AlertRule.objects.get().cluster == theirs
    assert "cpu_percent" in run("alerts", "db-metrics", "--owner", "bob")
    assert "No alert rules" in run("alerts", "db-metrics", "--owner", "alice")


def test_an_unknown_owner_fails(cluster_row: Cluster) -> None:
    with pytest.raises(CommandError, match="No user named 'zed'."):
        run("show", "db-metrics", "--owner", "zed")
    with pytest.raises(CommandError, match="No cluster named 'db-metrics' owned by 'bob'."):
        User.objects.create_user("bob")
        run("show", "db-metrics", "--owner", "bob")
