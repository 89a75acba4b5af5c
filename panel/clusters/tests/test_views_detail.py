"""The cluster page: header, progress polling, overview figures and the connection details box."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.services import lifecycle

from .conftest import ADMIN_PASSWORD, APP_PASSWORD, CA_PEM, make_cluster_row

HTMX = {"HX-Request": "true"}


def test_the_overview_shows_plan_connections_and_ports(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert cluster_row.name in page
    assert "db-s-2vcpu-4gb" in page
    assert "2 vCPU / 4 GB RAM / 38 GB disk" in page
    assert "<dd>100</dd>" in page  # max connections
    assert "<dd>97</dd>" in page  # available for pools
    assert "26900" in page
    assert "26901" in page
    assert "Not running" in page  # no postmaster behind this row
    assert "Cluster requested." in page  # recent events
    assert " UTC</time>" in page


def test_the_page_source_never_holds_a_password_until_shown(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert ADMIN_PASSWORD not in page
    assert APP_PASSWORD not in page
    assert "********" in page
    assert reverse("clusters:connection-reveal", args=[cluster_row.pk]) in page


def test_show_reveals_the_password_without_caching(owner_client, cluster_row):
    url = reverse("clusters:connection-reveal", args=[cluster_row.pk])
    response = owner_client.get(url, {"view": "params"}, headers=HTMX)
    assert response.status_code == 200
    assert ADMIN_PASSWORD in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert "<html" not in response.content.decode()


def test_the_connection_partial_switches_user_database_and_view(owner_client, cluster_row):
    url = reverse("clusters:connection", args=[cluster_row.pk])
    page = owner_client.get(url, {"user": "app", "database": "appdb", "view": "uri"}, headers=HTMX)
    text = page.content.decode()
    assert text.lstrip().startswith('<section id="connection-details"')
    assert "postgresql://app:********@localhost:26900/appdb?sslmode=require" in text
    assert '<option value="app" selected>' in text
    assert '<option value="appdb" selected>' in text
    assert '<option value="doadmin">doadmin</option>' in text
    assert '<label class="form-label small mb-1" for="conn-user">User</label>' in text
    assert '<select class="form-select form-select-sm" id="conn-database" name="database">' in text
    assert APP_PASSWORD not in text

    flags = owner_client.get(url, {"user": "app", "database": "appdb", "view": "flags"}, headers=HTMX)
    assert "PGSSLMODE=require psql -U app -h localhost -p 26900 -d appdb" in flags.content.decode()

    params = owner_client.get(url, {"view": "params"}, headers=HTMX).content.decode()
    for key in ("username", "password", "host", "port", "database", "sslmode"):
        assert f"<dt>{key}</dt>" in params


def test_the_revealed_connection_string_holds_the_real_password(owner_client, cluster_row):
    url = reverse("clusters:connection-reveal", args=[cluster_row.pk])
    text = owner_client.get(url, {"user": "app", "database": "appdb", "view": "uri"}).content.decode()
    assert f"postgresql://app:{APP_PASSWORD}@localhost:26900/appdb?sslmode=require" in text


def test_an_unknown_user_in_the_selector_is_explained_not_a_crash(owner_client, cluster_row):
    url = reverse("clusters:connection", args=[cluster_row.pk])
    response = owner_client.get(url, {"user": "ghost"}, headers=HTMX)
    assert response.status_code == 200
    assert "No user named" in response.content.decode()


def test_copy_buttons_fetch_secrets_from_an_owner_checked_no_store_endpoint(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert "data-copy-url=" in page
    assert 'data-copy-text="localhost"' in page
    url = reverse("clusters:connection-secret", args=[cluster_row.pk])
    uri = owner_client.get(url, {"user": "app", "database": "appdb", "format": "uri"})
    assert uri.status_code == 200
    assert uri["Content-Type"].startswith("text/plain")
    assert "no-store" in uri["Cache-Control"]
    assert uri.content.decode() == f"postgresql://app:{APP_PASSWORD}@localhost:26900/appdb?sslmode=require"
    password = owner_client.get(url, {"format": "password"})
    assert password.content.decode() == ADMIN_PASSWORD
    flags = owner_client.get(url, {"format": "flags"}).content.decode()
    assert flags.startswith(f"PGPASSWORD={ADMIN_PASSWORD} PGSSLMODE=require psql -U doadmin")
    assert owner_client.get(url, {"format": "html"}).status_code == 400


def test_it_downloads_the_ca_certificate_as_pem(owner_client, cluster_row):
    response = owner_client.get(reverse("clusters:ca-certificate", args=[cluster_row.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-pem-file"
    assert response["Content-Disposition"] == 'attachment; filename="db-row-ca-certificate.crt"'
    assert response.content.decode() == CA_PEM


def test_a_server_without_ca_has_no_download_button(owner_client, owner):
    cluster = make_cluster_row(owner, "db-external", kind="external", ca_certificate="", pooler_port=None)
    page = owner_client.get(reverse("clusters:connection", args=[cluster.pk])).content.decode()
    assert "Download CA certificate" not in page
    assert owner_client.get(reverse("clusters:ca-certificate", args=[cluster.pk])).status_code == 404


def test_an_attached_server_shows_dashes_for_plan_figures(owner_client, owner, monkeypatch):
    from panel.clusters import services

    cluster = make_cluster_row(owner, "db-external", kind="external", plan_slug="", pooler_port=None)
    monkeypatch.setattr(services, "overview", lambda c: services.Overview(None, None))
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert page.count("<dd>—</dd>") >= 3  # max connections, pools, pooler port
    assert "Start</button>" not in page  # the panel does not run attached servers


def test_a_busy_cluster_polls_its_live_fragment_every_second(owner_client, owner):
    cluster = make_cluster_row(
        owner, status=ClusterStatus.CREATING, progress=40, progress_message="Generating TLS certificates"
    )
    url = reverse("clusters:detail", args=[cluster.pk])
    page = owner_client.get(url).content.decode()
    live_url = reverse("clusters:live", args=[cluster.pk])
    assert f'hx-get="{live_url}?status=creating"' in page
    assert 'hx-trigger="every 1s"' in page  # panel.js pauses it while the tab is hidden
    assert "Generating TLS certificates" in page
    assert 'data-progress="40"' in page
    # The tab refetches itself, once, when a poll finds the status moved on.
    assert 'hx-trigger="cluster-status-changed from:body"' in page
    assert f'hx-get="{url}"' in page
    assert 'hx-select="#cluster-tab-content"' in page
    assert 'id="cluster-tab-content"' in page


def test_the_poll_renders_only_the_live_fragment(owner_client, owner, django_assert_max_num_queries):
    cluster = make_cluster_row(
        owner, status=ClusterStatus.CREATING, progress=40, progress_message="Generating TLS certificates"
    )
    url = reverse("clusters:live", args=[cluster.pk])
    with django_assert_max_num_queries(5):  # session, user, cluster, firing alerts, storage (Disk full)
        response = owner_client.get(url, {"status": "creating"}, headers=HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert text.lstrip().startswith('<div id="cluster-live"')
    assert text.rstrip().endswith("</div>")
    assert "Generating TLS certificates" in text and 'data-progress="40"' in text
    assert "every 1s" in text  # still busy: keeps polling
    assert "<html" not in text and "panel-sidebar" not in text and "cluster-tabs" not in text
    assert "Recent events" not in text and "connection-details" not in text
    assert "HX-Trigger" not in response.headers  # same status: the tab stays as it is


def test_the_poll_stops_and_refreshes_the_tab_once_the_job_is_over(owner_client, owner):
    cluster = make_cluster_row(owner, status=ClusterStatus.CREATING, progress=80)
    url = reverse("clusters:live", args=[cluster.pk])
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.ONLINE, progress=100)

    response = owner_client.get(url, {"status": "creating"}, headers=HTMX)

    text = response.content.decode()
    assert 'data-status="online"' in text
    assert "hx-trigger" not in text and "hx-get" not in text  # polling stops
    assert "cluster-status-changed" in response["HX-Trigger"]


def test_a_restart_refreshes_the_tab_at_each_status_it_passes(owner_client, owner):
    cluster = make_cluster_row(owner, status=ClusterStatus.STOPPING)
    url = reverse("clusters:live", args=[cluster.pk])
    assert "HX-Trigger" not in owner_client.get(url, {"status": "stopping"}, headers=HTMX).headers
    Cluster.objects.filter(pk=cluster.pk).update(status=ClusterStatus.STARTING)
    response = owner_client.get(url, {"status": "stopping"}, headers=HTMX)
    assert "cluster-status-changed" in response["HX-Trigger"]
    assert f'hx-get="{url}?status=starting"' in response.content.decode()


def test_a_busy_cluster_page_does_not_walk_the_data_directory(
    owner_client, owner, settings, tmp_path, monkeypatch
):
    from panel.clusters.engine import postgres

    settings.PANEL_DATA_DIR = str(tmp_path)
    walks: list[object] = []
    monkeypatch.setattr(postgres, "directory_size", lambda path: walks.append(path) or 4096)
    busy = make_cluster_row(owner, status=ClusterStatus.CREATING, progress=40)
    busy.pgdata.mkdir(parents=True)
    owner_client.get(reverse("clusters:detail", args=[busy.pk]))
    assert walks == []  # a job is rewriting PGDATA; the tab is fetched again when it ends

    idle = make_cluster_row(owner, "db-idle", port=26910, pooler_port=26911)
    idle.pgdata.mkdir(parents=True)
    page = owner_client.get(reverse("clusters:detail", args=[idle.pk])).content.decode()
    assert walks == [idle.pgdata]
    assert "4.0\xa0KB" in page


def test_an_idle_cluster_page_does_not_poll(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode()
    assert 'id="cluster-live"' in page
    assert "every 1s" not in page  # online: nothing polls, so the swap that ends the job stops it
    assert "cluster-status-changed" not in page


def test_a_failed_creation_shows_the_reason_with_retry_and_delete(owner_client, owner):
    cluster = make_cluster_row(owner, status=ClusterStatus.ERROR, error_message="initdb: disk full")
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert "initdb: disk full" in page
    assert reverse("clusters:retry", args=[cluster.pk]) in page
    assert 'data-bs-target="#delete-cluster-modal"' in page


def test_retry_is_not_offered_to_a_cluster_that_was_online(owner_client, owner):
    from django.utils import timezone

    cluster = make_cluster_row(owner, status=ClusterStatus.ERROR, online_since=timezone.now())
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert reverse("clusters:retry", args=[cluster.pk]) not in page


def test_actions_offer_only_what_the_status_allows(owner_client, owner):
    online = make_cluster_row(owner, "db-online")
    page = owner_client.get(reverse("clusters:detail", args=[online.pk])).content.decode()
    assert reverse("clusters:action", args=[online.pk, "stop"]) in page
    assert reverse("clusters:action", args=[online.pk, "restart"]) in page
    assert reverse("clusters:action", args=[online.pk, "start"]) not in page
    stopped = make_cluster_row(owner, "db-stopped", status=ClusterStatus.STOPPED, port=26930)
    page = owner_client.get(reverse("clusters:detail", args=[stopped.pk])).content.decode()
    assert reverse("clusters:action", args=[stopped.pk, "start"]) in page
    assert reverse("clusters:action", args=[stopped.pk, "stop"]) not in page
    assert reverse("clusters:action", args=[stopped.pk, "restart"]) not in page


def test_a_degraded_cluster_offers_restart_and_stop_not_start(owner_client, owner):
    degraded = make_cluster_row(owner, "db-degraded", status=ClusterStatus.DEGRADED)
    page = owner_client.get(reverse("clusters:detail", args=[degraded.pk])).content.decode()
    offered = re.findall(r'data-action="(\w+)"', page)
    assert offered == ["restart", "stop"]
    assert reverse("clusters:action", args=[degraded.pk, "start"]) not in page
    # …and the server refuses a Start posted anyway, the status unchanged.
    response = owner_client.post(reverse("clusters:action", args=[degraded.pk, "start"]), follow=True)
    assert "The cluster is degraded; it cannot start now." in response.content.decode()
    degraded.refresh_from_db()
    assert degraded.status == ClusterStatus.DEGRADED


@pytest.mark.parametrize(
    ("status", "offered"),
    [
        (ClusterStatus.ONLINE, ["restart", "stop"]),
        (ClusterStatus.DEGRADED, ["restart", "stop"]),
        (ClusterStatus.STOPPED, ["start"]),
        (ClusterStatus.STARTING, []),
        (ClusterStatus.STOPPING, []),
        (ClusterStatus.RESIZING, []),
        (ClusterStatus.ERROR, []),
    ],
)
def test_the_actions_menu_follows_the_statuses_each_action_allows(owner_client, owner, status, offered):
    cluster = make_cluster_row(owner, "db-menu", status=status)
    page = owner_client.get(reverse("clusters:detail", args=[cluster.pk])).content.decode()
    assert re.findall(r'data-action="(\w+)"', page) == offered
    assert all(status in lifecycle.ACTION_STATUSES[action] for action in offered)


def test_an_action_with_redis_down_says_so_and_keeps_the_status(owner_client, cluster_row, redis_down):
    response = owner_client.post(reverse("clusters:action", args=[cluster_row.pk, "restart"]), follow=True)
    assert "The task queue" in response.content.decode()
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.ONLINE


def test_an_action_marks_the_cluster_busy_when_queued(owner_client, cluster_row, redis_server):
    response = owner_client.post(reverse("clusters:action", args=[cluster_row.pk, "stop"]))
    assert response.status_code == 302
    cluster_row.refresh_from_db()
    assert cluster_row.status == ClusterStatus.STOPPING


def test_an_unknown_action_is_a_404(owner_client, cluster_row):
    assert owner_client.post(reverse("clusters:action", args=[cluster_row.pk, "explode"])).status_code == 404


def test_actions_refuse_get(owner_client, cluster_row):
    assert owner_client.get(reverse("clusters:action", args=[cluster_row.pk, "stop"])).status_code == 405
