"""Every figure through the one number formatter: a finished run's page, in German and English,
writes whole numbers of 1000 and more with their digits grouped (138.090 / 138,090)."""

from __future__ import annotations

import pytest
from django.test import Client

from benchmarks.tests.test_views_pages import SUMMARY, make_run, run_url
from panel.clusters.tests.conftest import make_cluster_row


@pytest.fixture
def big_run(owner):
    cluster = make_cluster_row(owner)
    return make_run(
        cluster,
        samples=3,
        duration_s=0,
        transactions=25000,
        summary={**SUMMARY, "transactions_processed": 138090, "failed_transactions": 1234},
    )


@pytest.mark.parametrize(("language", "grouped"), [("de", "138.090"), ("en", "138,090")])
def test_the_run_page_groups_whole_numbers(owner_client: Client, big_run, language, grouped) -> None:
    page = owner_client.get(
        run_url("benchmarks:run-detail", big_run), HTTP_ACCEPT_LANGUAGE=language
    ).content.decode()
    assert f"<td>{grouped}</td>" in page or f">{grouped}<" in page, grouped
    assert "138090" not in page
    assert "1.234" in page if language == "de" else "1,234" in page
    assert "25.000" in page if language == "de" else "25,000" in page  # transactions per client
