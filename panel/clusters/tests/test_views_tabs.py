"""The cluster's tab bar (issue 38): seven tabs and a More menu, whose toggle carries the name of
the folded tab being shown (a link with aria-current, as every other active tab)."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from panel.clusters.models import Cluster


def tab_bar(page: str) -> str:
    return page[page.index('<ul class="nav nav-tabs cluster-tabs">') :].split("</ul>\n</li>\n</ul>", 1)[0]


def test_the_overview_shows_seven_tabs_and_more(owner_client: Client, cluster_row: Cluster) -> None:
    bar = tab_bar(owner_client.get(reverse("clusters:detail", args=[cluster_row.pk])).content.decode())
    assert len(re.findall(r'<li class="nav-item">', bar)) == 7
    assert re.search(r'role="button" data-bs-toggle="dropdown"[^>]*>More</a>', bar)
    assert len(re.findall(r'class="dropdown-item', bar)) == 4


@pytest.mark.parametrize(
    ("url_name", "label"),
    [
        ("logs:tab", "Logs"),
        ("quotas:tab", "Quotas"),
        ("migrate:tab", "Migration"),
    ],
)
def test_a_folded_tab_names_the_toggle(
    owner_client: Client, cluster_row: Cluster, url_name: str, label: str
) -> None:
    bar = tab_bar(owner_client.get(reverse(url_name, args=[cluster_row.pk])).content.decode())
    toggle = re.search(
        r'<a class="nav-link dropdown-toggle active" aria-current="page"[^>]*>([^<]*)</a>', bar
    )
    assert toggle and toggle.group(1) == label, bar
