"""What every endpoint module shares: the error responses it documents and the ownership lookup."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

from panel.api import services
from panel.api.v2.errors import ApiError
from panel.api.v2.schemas import Error
from panel.clusters.face import clusters_for
from panel.clusters.models import Cluster

# 422 for reads too: a query or path parameter that does not validate (page=abc) is refused so.
ERRORS: dict[int, type[Schema]] = {401: Error, 403: Error, 404: Error, 422: Error, 429: Error}
WRITE_ERRORS: dict[int, type[Schema]] = {**ERRORS, 400: Error, 409: Error, 422: Error}


class Pagination(Schema):
    """``page`` and ``per_page`` of a list (other query parameters are ignored)."""

    page: int = Field(1, ge=1)
    per_page: int = Field(20, ge=1, le=200)


def page_of(request: HttpRequest, qs: QuerySet[Any], pagination: Pagination) -> services.Page:
    """One page of ``qs`` with the links to the others, built on this request's own URL."""
    return services.paginate(
        qs,
        page=pagination.page,
        per_page=pagination.per_page,
        base_url=request.build_absolute_uri(request.path),
    )


def listed(key: str, page: services.Page, show: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """A list answer: the page's rows under ``key``, each as ``show`` writes it, with the links to
    the other pages and the total."""
    return {key: [show(row) for row in page.items], "links": page.links, "meta": {"total": page.total}}


def owned_cluster(user: Any, database_id: uuid.UUID) -> Cluster:
    """The caller's cluster (staff: any). Another account's cluster is a 404, as one that does
    not exist: a 403 would tell that it exists."""
    cluster = clusters_for(user).select_related("node").filter(pk=database_id).first()
    if cluster is None:
        raise ApiError(404, "No database cluster with that id.")
    return cluster
