"""Bearer-token authentication and the scope each operation needs."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpRequest
from ninja.security import HttpBearer

from panel.api import services
from panel.api.models import ApiToken
from panel.api.services import ratelimit
from panel.api.v2.errors import ApiError


class TokenAuth(HttpBearer):
    """``Authorization: Bearer <token>``; ``request.auth`` is then ``(owner, token)``. Nothing of
    the session is read, so CSRF (a browser's cookie riding along) does not come into it."""

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        found = services.authenticate(token)
        if found is None:
            return None
        # Counted per token (the middleware puts the quota in the ratelimit-* headers).
        quota = ratelimit.take(found[1].prefix)
        request.ratelimit = quota  # type: ignore[attr-defined]
        if quota is not None and quota.exceeded:
            raise ApiError(
                429,
                f"Too many requests: this token may make {quota.limit} per hour; the count starts "
                "again at the time in ratelimit-reset.",
            )
        return found


def caller(request: HttpRequest, scope: str) -> tuple[User, ApiToken]:
    """The owner and token of this call, if the token has ``scope``; a 403 otherwise."""
    user, token = request.auth  # type: ignore[attr-defined]
    if not token.has_scope(scope):
        raise ApiError(403, f"This token lacks the scope {scope}.")
    return user, token
