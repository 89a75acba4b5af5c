"""The members card of a one-member cluster: what it says, and a switchover refused there."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

from django.template.loader import render_to_string
from django.test import Client

from panel.clusters.forms import SwitchoverForm
from panel.clusters.models import Cluster


def test_a_one_member_cluster_says_it_has_no_standby(owner_client: Client, cluster_row: Cluster) -> None:
    page = owner_client.get(f"/clusters/{cluster_row.pk}/members/").content.decode()
    assert "one member and no standby node" in page
    assert 'hx-trigger="every 2s"' not in page  # nothing to poll


def test_a_switchover_on_a_one_member_cluster_is_refused_on_the_card(
    owner_client: Client, cluster_row: Cluster
) -> None:
    answer = owner_client.post(
        f"/clusters/{cluster_row.pk}/members/switchover/", {"to": ""}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200
    assert "invalid-feedback" in answer.content.decode()
    # Done or refused, the Overview's events list is told to fetch itself again.
    assert json.loads(answer["HX-Trigger"]).keys() == {"cluster-events-changed"}
    cluster_row.refresh_from_db()
    assert not cluster_row.is_ha


def test_an_outsider_gets_404(other_client: Client, cluster_row: Cluster) -> None:
    assert other_client.get(f"/clusters/{cluster_row.pk}/members/").status_code == 404


def test_a_restarting_member_shows_a_dash_not_none() -> None:
    """While a member restarts Patroni reports no timeline: the cell shows a dash (it showed the
    literal "None", issue 38)."""
    cluster = SimpleNamespace(pk=uuid.uuid4(), is_ha=True)
    member = SimpleNamespace(
        name="member-2", role="standby", node="node-1", state="starting", lag_bytes=None, timeline=None
    )
    page = render_to_string(
        "clusters/_members.html", {"cluster": cluster, "members": [member], "form": SwitchoverForm()}
    )
    assert "None" not in page
    assert "<td>—</td>" in page
