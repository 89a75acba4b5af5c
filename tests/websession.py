"""A person's browser session on a running panel (gunicorn, as `make run` serves it), as plain
HTTP: the login form, then pages and CSRF-checked form posts, with the session's cookies."""

from __future__ import annotations

import http.cookiejar
import re
import urllib.parse
import urllib.request

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class WebSession:
    """Cookies kept between requests; ``url`` is where the last answer came from (after the
    redirects it followed)."""

    def __init__(self, base: str, timeout: float = 60) -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.url = ""
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def login(self, username: str, password: str) -> str:
        page = self.post("/login/", {"username": username, "password": password}, referer="/login/")
        assert not self.url.endswith("/login/"), f"the login as {username} failed:\n{page[-2000:]}"
        return page

    def fetch(self, path: str, *, language: str = "") -> bytes:
        headers = {"Accept-Language": language} if language else {}
        return self._open(urllib.request.Request(self.base + path, headers=headers), self.timeout)

    def get(self, path: str, *, language: str = "") -> str:
        return self.fetch(path, language=language).decode()

    def post(self, path: str, data: dict[str, str], *, referer: str, timeout: float | None = None) -> str:
        """``data`` sent as the form on ``referer`` sends it, with that page's CSRF token."""
        page = self.get(referer)
        token = TOKEN.search(page)
        assert token, page[:2000]
        body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token.group(1)}).encode()
        request = urllib.request.Request(
            self.base + path, data=body, headers={"Referer": self.base + referer}
        )
        return self._open(request, timeout or self.timeout).decode()

    def _open(self, request: urllib.request.Request, timeout: float) -> bytes:
        with self.opener.open(request, timeout=timeout) as response:
            self.url = response.geturl()
            return bytes(response.read())
