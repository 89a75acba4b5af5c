"""The API's one error shape, ``{"id", "message", "request_id"}``, for every failure: ours,
django-ninja's (authentication, validation, a body that is not JSON) and Django's (an unknown
path, a method the path does not take, a crash)."""

from __future__ import annotations

import logging
import uuid

from django.http import HttpRequest, HttpResponse, JsonResponse

from panel.core.errors import ServiceError

logger = logging.getLogger("panel.api")

ERROR_IDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    422: "unprocessable_entity",
    429: "too_many_requests",
    500: "server_error",
}
MESSAGES = {
    401: "A valid API token is required: Authorization: Bearer <token>.",
    404: "The resource you were accessing could not be found.",
    405: "This path does not take that method.",
    500: "Server error. The request id names it in the panel's log.",
}


class ApiError(Exception):
    """A refusal with its HTTP status; the id follows from the status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def service_error_status(exc: ServiceError) -> int:
    """A service's refusal as an HTTP status, from its code, never its words: a name taken is a
    409 conflict, a user, database or pool that is not there a 404, anything else a 422."""
    code = exc.code or ""
    if code.endswith(".name_taken"):
        return 409
    if code.endswith(".not_found"):
        return 404
    return 422


def error_id(status: int) -> str:
    if status in ERROR_IDS:
        return ERROR_IDS[status]
    return "server_error" if status >= 500 else "bad_request"


def request_id(request: HttpRequest) -> str:
    """This request's id, made on first use (the middleware makes it first for /v2/)."""
    rid = getattr(request, "request_id", None)
    if rid is None:
        rid = str(uuid.uuid4())
        request.request_id = rid  # type: ignore[attr-defined]
    return rid


def error_response(
    request: HttpRequest, status: int, message: str | None = None, code: str | None = None
) -> HttpResponse:
    """The error body; ``id`` is the refusal's code where a service gave one (``pool.name_taken``,
    the same code its form error comes from), else the status's id (``not_found``)."""
    body = {
        "id": code or error_id(status),
        "message": message or MESSAGES.get(status, "The request could not be answered."),
        "request_id": request_id(request),
    }
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="pgpanel API"'
    return response
