"""The Overview's replica form (issue 38): it offers the source's plan, and a refused request shows
every refusal at once (a plan too small used to hide a bad name until the plan was fixed)."""

from __future__ import annotations

import re

from django.test import Client

from panel.clusters.models import Cluster


def test_the_form_offers_the_sources_plan(owner_client: Client, cluster_row: Cluster) -> None:
    page = owner_client.get(f"/clusters/{cluster_row.pk}/replicas/").content.decode()
    assert re.search(r'<option value="db-s-2vcpu-4gb" selected>', page), page


def test_a_bad_name_and_a_small_plan_are_both_shown(owner_client: Client, cluster_row: Cluster) -> None:
    before = Cluster.objects.count()
    answer = owner_client.post(
        f"/clusters/{cluster_row.pk}/replicas/add/",
        {"name": "Bad Name!", "plan": "db-s-1vcpu-1gb"},
        HTTP_HX_REQUEST="true",
    )
    assert answer.status_code == 200
    errors = re.findall(r'class="invalid-feedback d-block">([^<]*)<', answer.content.decode())
    assert any("at least its source" in error for error in errors), errors
    assert any("replica name" in error for error in errors), errors
    assert Cluster.objects.count() == before
