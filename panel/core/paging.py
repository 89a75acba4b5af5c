"""Lists that grow (clusters, a node's clusters) shown a page at a time: Django's Paginator, 25
rows a page, and the links to the other pages as URLs of the page being read with only the page
parameter changed, so that HTMX can fetch a page's fragment and the browser's address still
names the page (``templates/_pager.html``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest

PER_PAGE = 25


@dataclass(frozen=True)
class PageLink:
    """A link of the pager: a page's number and URL, or a gap (``number`` None: "…")."""

    number: int | None
    url: str
    current: bool


@dataclass(frozen=True)
class Paged:
    """One page of a list, and what its pager shows."""

    page: Page
    links: list[PageLink]
    previous_url: str
    next_url: str

    @property
    def rows(self) -> list[Any]:
        return list(self.page.object_list)

    @property
    def several(self) -> bool:
        return self.page.paginator.num_pages > 1


def page_url(request: HttpRequest, param: str, number: int) -> str:
    """The URL of the page being read with ``param`` set to ``number`` (other parameters kept)."""
    query = request.GET.copy()
    query[param] = str(number)
    return f"{request.path}?{query.urlencode()}"


def paginate(
    request: HttpRequest,
    items: QuerySet[Any] | Sequence[Any],
    *,
    param: str = "page",
    per_page: int = PER_PAGE,
) -> Paged:
    """The page ``request`` asks for in ``param`` (a number past the last: the last; no number:
    the first)."""
    paginator = Paginator(items, per_page)
    page = paginator.get_page(request.GET.get(param))
    links = [
        PageLink(None, "", False)
        if number == Paginator.ELLIPSIS
        else PageLink(int(number), page_url(request, param, int(number)), number == page.number)
        for number in paginator.get_elided_page_range(page.number, on_each_side=2, on_ends=1)
    ]
    return Paged(
        page=page,
        links=links,
        previous_url=page_url(request, param, page.previous_page_number()) if page.has_previous() else "",
        next_url=page_url(request, param, page.next_page_number()) if page.has_next() else "",
    )
