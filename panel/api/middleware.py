"""Middleware of the API's URLs: a request id on every response, and Django's own error pages
(an unknown path, a method not taken, a crash) in the API's error shape."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from panel.api.v2.errors import MESSAGES, error_response, request_id

API_PREFIX = "/v2/"


class ApiRequestMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        rid = request_id(request)
        response = self.get_response(request)
        is_json = response.get("Content-Type", "").startswith("application/json")
        if response.status_code >= 400 and not is_json:
            allowed = response.get("Allow")
            message = MESSAGES.get(response.status_code)
            if response.status_code == 405 and allowed:
                message = f"This path takes only {allowed}."
            response = error_response(request, response.status_code, message)
            if allowed:
                response["Allow"] = allowed
        response["x-request-id"] = rid
        quota = getattr(request, "ratelimit", None)
        if quota is not None:
            for name, value in quota.headers().items():
                response[name] = value
        return response
