"""Every figure through the one number formatter: the Quotas tab, in German and English, writes
relation counts below repquota's 100k with their digits grouped (99.999 / 99,999), while the
machine-read attributes (aria-valuenow, data-progress) stay plain."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from panel.quotas.models import QuotaState
from panel.quotas.tests.test_views import MB, appdb_quota


@pytest.mark.parametrize(("language", "grouped"), [("de", "99.999"), ("en", "99,999")])
def test_the_quotas_tab_groups_relation_counts(owner_client: Client, owner, language, grouped) -> None:
    cluster = appdb_quota(
        owner,
        space_used=50 * MB,
        files_used=1500,
        files_soft=50_000,
        files_hard=99_999,
        state=QuotaState.OK,
    )
    page = owner_client.get(reverse("quotas:tab", args=[cluster.pk]), HTTP_ACCEPT_LANGUAGE=language)
    row = page.content.decode()
    row = row[row.index('data-quota="database:appdb"') :]
    row = row[: row.index("</tr>")]
    sep = "." if language == "de" else ","
    for cell in (f"1{sep}500", f"50{sep}000", grouped):
        assert cell in row, cell
    assert "99999" not in row
    assert 'data-progress="' in row and f'data-progress="1{sep}' not in row  # machine-read: plain
