"""The Settings tab: what the cluster is, for its owner."""

from __future__ import annotations

from django.urls import reverse


def test_the_settings_tab_shows_the_clusters_plan_and_node(owner_client, cluster_row):
    page = owner_client.get(reverse("clusters:settings", args=[cluster_row.pk])).content.decode()
    assert f'aria-current="page" href="/clusters/{cluster_row.pk}/settings/"' in page
    assert f"<code>{cluster_row.plan_slug}</code>" in page
    assert f"PostgreSQL {cluster_row.version}" in page
