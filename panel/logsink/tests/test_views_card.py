"""The Logs tab's log-sink card: a refused sink shows its error next to the field (status 200
under HTMX) and nothing is saved; a good one is added and listed; outsiders get 404s."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.clusters.models import Cluster, ClusterStatus
from panel.logsink.models import LogSink

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


# The add form of an rsyslog sink on this machine (refused unless loopback is allowed).
SINK_FORM = {
    "sink_name": "central",
    "sink_type": "rsyslog",
    "server": "127.0.0.1",
    "port": "6514",
    "format": "rfc5424",
}


@pytest.fixture
def cluster(owner: User) -> Cluster:
    return Cluster.objects.create(
        owner=owner, name="logs-card", version="15", status=ClusterStatus.ONLINE, port=1
    )


def test_card_refuses_next_to_the_field_and_adds_a_good_sink(
    cluster: Cluster, owner_client: Client, other_client: Client, settings: Any
) -> None:
    url = f"/clusters/{cluster.pk}/logsinks/"
    form = dict(SINK_FORM)
    # Loopback is no destination unless the operator allows it: refused on the server field.
    response = owner_client.post(url + "add/", form, headers=HTMX)
    page = response.content.decode()
    # The tenant reads what to do; the operator's setting is named in the log only (issue 38).
    assert response.status_code == 200 and "ask the panel&#x27;s operator to allow that network" in page
    assert "PANEL_LOGSINK_TARGET_NETWORKS" not in page
    assert not LogSink.objects.exists()
    settings.PANEL_LOGSINK_TARGET_NETWORKS = ["127.0.0.0/8"]
    response = owner_client.post(
        url + "add/", {**form, "format": "custom", "logline": "%exec%"}, headers=HTMX
    )
    assert response.status_code == 200 and "invalid-feedback" in response.content.decode()
    assert not LogSink.objects.exists()
    response = owner_client.post(url + "add/", form, headers=HTMX)
    assert response.status_code == 200 and 'data-sink="central"' in response.content.decode()
    sink = LogSink.objects.get(cluster=cluster)
    assert sink.config == {"server": "127.0.0.1", "port": 6514, "tls": False, "format": "rfc5424"}
    assert other_client.get(url).status_code == 404
    assert other_client.post(url + "add/", form).status_code == 404
    assert other_client.post(f"{url}{sink.pk}/delete/").status_code == 404
    assert owner_client.post(f"{url}{sink.pk}/delete/", headers=HTMX).status_code == 200
    assert not LogSink.objects.exists()


def test_card_groups_the_entries_sent_as_the_language_does(
    cluster: Cluster, owner_client: Client, settings: Any
) -> None:
    settings.PANEL_LOGSINK_TARGET_NETWORKS = ["127.0.0.0/8"]
    form = dict(SINK_FORM)
    owner_client.post(f"/clusters/{cluster.pk}/logsinks/add/", form, headers=HTMX)
    LogSink.objects.filter(cluster=cluster).update(sent_count=12345)
    url = f"/clusters/{cluster.pk}/logsinks/"
    german = owner_client.get(url, headers=HTMX, HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "12.345 Einträge gesendet" in german
    assert (
        "12,345 entries sent"
        in owner_client.get(url, headers=HTMX, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    )
