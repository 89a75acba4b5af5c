"""The Settings tab: what the cluster is, for its owner."""

from __future__ import annotations

from django.urls import reverse

from panel.clusters.models import ClusterKind, TrustedSource

from .conftest import make_cluster_row


def test_the_settings_tab_shows_the_clusters_plan_and_node(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:settings", args=[cluster_row.pk])).content.decode()
    assert f'aria-current="page" href="/clusters/{cluster_row.pk}/settings/"' in page
    assert f"<code>{cluster_row.plan_slug}</code>" in page
    assert f"PostgreSQL {cluster_row.version}" in page


def _section(client, cluster) -> str:
    return client.get(reverse("clusters:settings", args=[cluster.pk])).content.decode()


def test_without_trusted_sources_the_section_says_anyone_may_connect(owner_client, cluster_row):
    page = _section(owner_client, cluster_row)
    assert 'id="settings-trusted-sources"' in page
    assert "accepts connections from any address" in page
    assert f'action="/clusters/{cluster_row.pk}/settings/trusted-sources/add/"' in page
    # The test client comes from 127.0.0.1: offered as a source.
    assert 'value="127.0.0.1"' in page and "Add my current IP (127.0.0.1)" in page


def test_the_section_lists_the_sources_and_warns_when_benchmarks_are_shut_out(owner_client, cluster_row):
    TrustedSource.objects.create(cluster=cluster_row, value="203.0.113.0/24")
    page = _section(owner_client, cluster_row)
    assert 'data-source="203.0.113.0/24"' in page
    assert "Only these addresses may connect" in page
    assert "The panel's benchmarks connect from 127.0.0.1, which is not trusted" in page

    TrustedSource.objects.create(cluster=cluster_row, value="127.0.0.1")
    page = _section(owner_client, cluster_row)
    assert "which is not trusted" not in page
    assert "Add my current IP" not in page  # already trusted


def test_an_attached_server_has_no_add_form(owner_client, owner):
    attached = make_cluster_row(owner, name="ext", kind=ClusterKind.EXTERNAL)
    page = _section(owner_client, attached)
    assert "keeps its own pg_hba.conf" in page and "trusted-sources/add/" not in page


def test_the_connection_box_says_when_trusted_sources_are_in_force(owner_client, cluster_row):
    url = reverse("clusters:connection", args=[cluster_row.pk])
    assert "trusted-sources-note" not in owner_client.get(url).content.decode()
    TrustedSource.objects.create(cluster=cluster_row, value="203.0.113.7")
    TrustedSource.objects.create(cluster=cluster_row, value="2001:db8::/32")
    box = owner_client.get(url).content.decode()
    assert "Only 2 trusted sources may connect." in box
    assert f'href="/clusters/{cluster_row.pk}/settings/#settings-trusted-sources"' in box
