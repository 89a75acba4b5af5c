"""What every endpoint module shares: the error responses it documents, the scope and ownership
lookups, a named row or its 404."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.db.models import Model, QuerySet
from django.http import HttpRequest
from ninja import Schema
from pydantic import Field

from panel.api import services
from panel.api.models import ApiToken
from panel.api.v2.auth import caller
from panel.api.v2.errors import ApiError
from panel.api.v2.schemas import Error
from panel.clusters.face import clusters_for
from panel.clusters.models import Cluster

Row = TypeVar("Row", bound=Model)

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


def named(rows: QuerySet[Row], name: str, what: str) -> Row:
    """The row of a cluster's ``rows`` called ``name``; a 404 that names ``what`` is missing."""
    found = rows.filter(name=name).first()
    if found is None:
        raise ApiError(404, f"No {what} named {name!r} on this cluster.")
    return found


def scoped_cluster(request: HttpRequest, database_id: uuid.UUID, scope: str) -> tuple[Cluster, ApiToken]:
    """The cluster a call is about and the calling token: a 403 for a token without ``scope``,
    then :func:`owned_cluster`'s 404 for a cluster the caller does not own."""
    user, token = caller(request, scope)
    return owned_cluster(user, database_id), token
