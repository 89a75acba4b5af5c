"""The NinjaAPI mounted at ``/v2/``: bearer tokens, the one error shape, the OpenAPI schema at
``/v2/openapi.json``. Ninja's docs page is off: it loads Swagger UI from a CDN, which the
panel's Content-Security-Policy (and its no-CDN rule) forbids."""

from __future__ import annotations

import logging
from typing import cast

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, re_path
from django.views.decorators.http import require_safe
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from panel.api.v2 import (
    backups,
    databases,
    firewall,
    logsink,
    managed,
    members,
    migration,
    pools,
    quotas,
    replicas,
    roles,
    settings,
)
from panel.api.v2.auth import TokenAuth
from panel.api.v2.errors import ApiError, error_response, service_error_status
from panel.core.errors import ServiceError

logger = logging.getLogger("panel.api")

api = NinjaAPI(
    title="pgpanel API",
    version="2",
    description="Managed PostgreSQL clusters, compatible with the managed service's v2 databases API.",
    urls_namespace="v2",
    openapi_url="/openapi.json",
    docs_url=None,
    auth=TokenAuth(),
)
api.add_router("/databases", managed.router)  # before /{uuid}: /metrics/credentials
api.add_router("/databases", databases.router)
api.add_router("/databases", pools.router)
api.add_router("/databases", roles.router)
api.add_router("/databases", firewall.router)
api.add_router("/databases", settings.router)
api.add_router("/databases", quotas.router)
api.add_router("/databases", backups.router)
api.add_router("/databases", replicas.router)
api.add_router("/databases", members.router)
api.add_router("/databases", migration.router)
api.add_router("/databases", logsink.router)


@api.exception_handler(ApiError)
def _api_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    return error_response(request, exc.status, exc.message)


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(request, 401)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # Ninja's own: "Cannot parse request body" (400) for a body that is not JSON, among others.
    return error_response(request, exc.status_code, exc.message)


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    problems = []
    for error in exc.errors:
        where = ".".join(str(part) for part in error.get("loc", ())[1:]) or "body"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return error_response(request, 422, "; ".join(problems) or "The request is not valid.")


@api.exception_handler(ServiceError)
def _service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    return error_response(request, service_error_status(exc), exc.message, exc.code)


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return error_response(request, 404)


@api.exception_handler(Exception)
def _server_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("API request %s failed", getattr(request, "request_id", "?"))
    return error_response(request, 500)


@login_not_required
def _unknown_path(request: HttpRequest) -> HttpResponse:
    return error_response(request, 404)


def urls() -> tuple[list[URLPattern], str]:
    """The API's URL patterns for ``include()``: each one exempt from the panel's login (the
    token is the login; ninja's views are CSRF-exempt and cookie-free), and any other path under
    ``/v2/`` a 404 in the API's shape rather than the login page."""
    # ninja makes paths only, no include()s
    patterns, _app_name, namespace = cast("tuple[list[URLPattern], str, str]", api.urls)
    for pattern in patterns:
        if pattern.name == "openapi-json":
            # The public, read-only schema: GET and HEAD only (ninja's view answers any method).
            pattern.callback = require_safe(pattern.callback)
        pattern.callback.login_required = False  # type: ignore[attr-defined]
    return [*patterns, re_path(r"^.*$", _unknown_path)], namespace
