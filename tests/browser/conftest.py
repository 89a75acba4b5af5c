"""Browser journeys: Playwright driving Debian's Chromium (never a downloaded browser)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not shutil.which(CHROMIUM):
        pytest.fail("Debian's chromium is not installed; run `make test`, which installs it")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1400, "height": 900}, "locale": "en-US"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


HTMX_BUSY = ".htmx-request, .htmx-swapping, .htmx-settling, .htmx-added"


def wait_for_htmx(page: Any) -> None:
    """Wait until htmx has settled: content it swapped in only listens to events after that."""
    page.wait_for_function(f"!document.querySelector({HTMX_BUSY!r})")
