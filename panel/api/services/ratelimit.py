"""The API's rate limit: PANEL_API_RATE_LIMIT (5,000, the managed service's) requests per hour
per token, counted in Redis so that every web process and machine shares one count. A fixed
window of an hour: ``reset`` is when it ends (Unix time), as the managed service's
``ratelimit-reset``. Redis not answering does not stop the API (the count is skipped, logged)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings

log = logging.getLogger(__name__)

WINDOW_SECONDS = 3600
_clients: dict[str, redis.Redis] = {}


@dataclass(frozen=True)
class Quota:
    limit: int
    used: int
    reset: int  # Unix time the window ends

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    @property
    def exceeded(self) -> bool:
        return self.used > self.limit

    def headers(self, now: float | None = None) -> dict[str, str]:
        found = {
            "ratelimit-limit": str(self.limit),
            "ratelimit-remaining": str(self.remaining),
            "ratelimit-reset": str(self.reset),
        }
        if self.exceeded:
            found["retry-after"] = str(max(1, self.reset - int(now if now is not None else time.time())))
        return found


def _client() -> redis.Redis:
    url = settings.REDIS_URL
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    return _clients[url]


def take(token_prefix: str, now: float | None = None) -> Quota | None:
    """Count one request of the token named by ``token_prefix``; its quota after it (None when
    Redis does not answer)."""
    now = time.time() if now is None else now
    start = int(now // WINDOW_SECONDS) * WINDOW_SECONDS
    key = f"pgpanel:api-rate:{token_prefix}:{start}"
    try:
        pipe = _client().pipeline()
        pipe.incr(key)
        pipe.expire(key, WINDOW_SECONDS + 60)
        used, _ok = pipe.execute()
    except redis.RedisError as exc:
        log.warning("API rate limit not counted (Redis: %s)", type(exc).__name__)
        return None
    return Quota(limit=settings.PANEL_API_RATE_LIMIT, used=int(used), reset=start + WINDOW_SECONDS)
