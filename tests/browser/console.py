"""Watching the browser's console during a browser journey: console errors, uncaught exceptions,
Content-Security-Policy violations, failed requests and error statuses, each labelled with the
step of the walk it happened in (issue 11, item 5; issue 38, item 5)."""

from __future__ import annotations

from playwright.sync_api import ConsoleMessage, Frame, Page, Request, Response

from tests.browser.conftest import wait_for_htmx

# Added by Playwright before any script of every page (through the DevTools protocol, which the
# page's policy does not govern): the browser reports a violation as this event, whatever the
# console shows of it (Chromium's own report of a refused style attribute is no console message).
CSP_WATCH = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error("CSP violation: " + e.violatedDirective + " refused " + (e.blockedURI || "inline")
    + " (" + (e.sample || "") + ") at " + (e.sourceFile || "?") + ":" + e.lineNumber);
});
"""


class ConsoleWatch:
    """Everything that went wrong in the browser, labelled with the step of the walk."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.step = "start"
        self.problems: list[str] = []
        self.navigations = 0
        self.expected_statuses: dict[str, int] = {}
        self._started: dict[Request, int] = {}
        self._aborted: list[tuple[Request, str]] = []
        page.add_init_script(CSP_WATCH)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.add(f"uncaught exception: {error}"))
        page.on("request", lambda request: self._started.setdefault(request, self.navigations))
        page.on("framenavigated", self._navigated)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def add(self, what: str) -> None:
        self.problems.append(f"[{self.step}] {what}")

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            url = message.location.get("url", "")
            expected = self.expected_statuses.get(url)
            if expected and f"status of {expected} " in message.text:
                return  # Chromium's own line for the response asked for on purpose
            self.add(f"console error: {message.text} ({message.location.get('url')})")

    def _navigated(self, frame: Frame) -> None:
        if frame == self.page.main_frame:
            self.navigations += 1

    def _failed(self, request: Request) -> None:
        what = f"request failed: {request.method} {request.url}: {request.failure}"
        if request.failure == "net::ERR_ABORTED":
            # Leaving a page cancels its polling request in flight: nothing a user sees. Judged once
            # the navigation that may have caused it is known.
            self._aborted.append((request, f"[{self.step}] {what}"))
        else:
            self.add(what)

    def _judge_aborted(self) -> None:
        for request, what in self._aborted:
            if self._started.get(request, self.navigations) == self.navigations:
                self.problems.append(f"{what} (no navigation away from its page)")
        self._aborted.clear()

    def _response(self, response: Response) -> None:
        if response.status >= 400 and self.expected_statuses.get(response.url) != response.status:
            self.add(f"HTTP {response.status}: {response.request.method} {response.url}")

    def expect_status(self, url: str, status: int) -> None:
        """A response the walk asks for on purpose (a missing page's 404), not a problem."""
        self.expected_statuses[url] = status

    def at(self, step: str) -> None:
        """Let the page finish what it does on load (htmx load triggers, icons), then name the next step."""
        settle(self.page)
        self._judge_aborted()
        self.step = step

    def report(self) -> list[str]:
        """The problems, each once, in the order they came (a poll repeats the same violation)."""
        return list(dict.fromkeys(self.problems))


def settle(page: Page) -> None:
    page.wait_for_load_state("load")
    wait_for_htmx(page)
    # Requests fired on load or after a short delay (the run form's check waits 300 ms) included.
    page.wait_for_load_state("networkidle")
    wait_for_htmx(page)
