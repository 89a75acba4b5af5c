"""The Quotas tab without a server behind it: the report's columns, the CSV, the empty state,
field errors that change nothing, and outsiders kept out."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone, translation

from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row
from panel.quotas import views
from panel.quotas.models import Quota, QuotaKind, QuotaState

MB = 1024**2


def appdb_quota(owner: User, **fields: object) -> Cluster:
    """A cluster row whose database appdb has a quota of 100 MB soft and 200 MB hard, and ``fields``."""
    cluster = make_cluster_row(owner)
    Quota.objects.create(
        cluster=cluster,
        kind=QuotaKind.DATABASE,
        name="appdb",
        space_soft=100 * MB,
        space_hard=200 * MB,
        **fields,
    )
    return cluster


@pytest.fixture
def measured(owner):
    return appdb_quota(
        owner,
        space_used=150 * MB,
        files_used=40,
        state=QuotaState.OVER_SOFT,
        over_since=timezone.now() - dt.timedelta(days=1),
        measured_at=timezone.now(),
    )


def test_the_tab_shows_repquotas_columns_and_the_banner(owner_client, measured):
    page = owner_client.get(reverse("quotas:tab", args=[measured.pk])).content.decode()
    # Plain sentences, not setquota's jargon ("Block grace time: 7days", "--", issue 38).
    assert "over a soft limit for 7 days (space) and 7 days (relations)" in page
    assert "Block grace" not in page and "7days" not in page and "quota-flags" not in page
    row = page[page.index('data-quota="database:appdb"') :]
    row = row[: row.index("</tr>")]
    for cell in ("150M", "100M", "200M", "6 days", "40", "Over soft limit"):
        assert cell in row, cell
    assert 'data-progress="75"' in row  # 150 of the 200M hard limit
    assert "is over its soft storage limit since" in page  # the cluster's banner


def test_the_csv_export_has_bytes_and_the_grace_left(owner_client, measured):
    response = owner_client.get(reverse("quotas:csv", args=[measured.pk]))
    assert response["Content-Disposition"] == 'attachment; filename="db-row-quotas.csv"'
    header, line = response.content.decode().splitlines()
    assert header.startswith("kind,name,flags,space_used_bytes")
    assert line.startswith(f"database,appdb,+-,{150 * MB},{100 * MB},{200 * MB},6days,40,0,0,,over_soft,")


def test_the_empty_state_says_what_to_do(owner_client, cluster_row):
    page = owner_client.get(reverse("quotas:tab", args=[cluster_row.pk])).content.decode()
    assert "No quotas yet" in page and "Set one below" in page


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"space_soft": "-5"}, "space_soft", "not a size"),
        ({"space_soft": "1.5G"}, "space_soft", "not a size"),
        ({"space_soft": "2G", "space_hard": "1G"}, "space_soft", "above the hard one"),
        ({"files_hard": "many"}, "files_hard", "not a number of relations"),
        ({"name": "nodb"}, "name", "No database named"),
        ({"kind": "role", "name": "nobody"}, "name", "No user named"),
    ],
)
def test_bad_input_is_a_field_error_and_changes_nothing(owner_client, cluster_row, fields, field, words):
    data = {
        "kind": "database",
        "name": "appdb",
        "space_soft": "0",
        "space_hard": "1G",
        "files_soft": "0",
        "files_hard": "0",
    }
    data.update(fields)
    page = owner_client.post(
        reverse("quotas:set", args=[cluster_row.pk]), data, headers={"HX-Request": "true"}
    )
    html = page.content.decode()
    assert page.status_code == 200
    feedback = html[html.index(f'id="id_{field}"') :]
    assert words in feedback[: feedback.index("</div>\n</div>") + 20] or words in feedback[:1500]
    assert not Quota.objects.exists()


def test_another_account_gets_404s(other_client, measured):
    quota = measured.quotas.get()
    for method, url in (
        ("get", reverse("quotas:tab", args=[measured.pk])),
        ("get", reverse("quotas:csv", args=[measured.pk])),
        ("post", reverse("quotas:set", args=[measured.pk])),
        ("post", reverse("quotas:remove", args=[measured.pk, quota.pk])),
        ("post", reverse("quotas:allow-writes", args=[measured.pk, quota.pk])),
    ):
        assert getattr(other_client, method)(url).status_code == 404, url
    assert Quota.objects.filter(pk=quota.pk).exists()


def test_periods_are_written_in_words_of_the_page_language():
    assert views.duration(7 * 24 * 3600) == "7 days"
    assert views.duration(6 * 3600 + 30 * 60) == "6 hours 30 minutes"
    assert views.duration(60) == "1 minute"
    with translation.override("de"):
        assert views.duration(7 * 24 * 3600) == "7 Tage"
        assert views.duration(3600) == "1 Stunde"


def test_saving_a_quota_says_what_it_means(owner_client, measured, monkeypatch):
    """The notice after saving (it said "saved: OK"); the quota itself is the service's business."""
    monkeypatch.setattr(views.services, "set_quota", lambda *args, **kwargs: Quota.objects.get(name="appdb"))
    data = {"kind": "database", "name": "appdb", "space_soft": "100M", "space_hard": "200M"}
    page = owner_client.post(
        reverse("quotas:set", args=[measured.pk]),
        {**data, "files_soft": "0", "files_hard": "0"},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert "its usage is over the soft limit, so writes stop when the grace period ends" in page
    assert "saved: " not in page
