"""Browser journeys: Playwright driving Debian's Chromium (never a downloaded browser)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.fixtures.clusters import make_local_cluster


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


def wait_for_htmx(page: Page) -> None:
    """Wait until htmx has settled: content it swapped in only listens to events after that."""
    # A function, not an expression: Playwright polls an expression with eval, which the panel's
    # Content-Security-Policy refuses.
    # The page's load comes first: htmx's deferred script defines `htmx` before DOMContentLoaded, but
    # reads base.html's htmx-config and processes the page only at DOMContentLoaded.
    page.wait_for_function(
        f"() => document.readyState === 'complete' && !document.querySelector({HTMX_BUSY!r})"
    )


JOURNEY_USER = "journey"
JOURNEY_PASSWORD = "journey-password-1"


@pytest.fixture
def journey_user(transactional_db: None) -> User:
    """The person walking through a journey; live_server needs committed rows."""
    return User.objects.create_user(JOURNEY_USER, "journey@example.com", JOURNEY_PASSWORD)


@pytest.fixture
def journey_cluster(journey_user: User) -> Iterator[Cluster]:
    """A real 1 GB-plan cluster of the journey user, deleted (with its PgBouncer) afterwards."""
    cluster = make_local_cluster(journey_user, name="db-journey")
    yield cluster
    if Cluster.objects.filter(pk=cluster.pk).exists():
        cluster.refresh_from_db()
        cluster_services.delete_cluster(cluster, confirm_name=cluster.name)


def log_in(page: Page, base_url: str, next_path: str = "/clusters/") -> None:
    """Open ``next_path``, get sent to the login page, log in, and land back there."""
    page.goto(f"{base_url}{next_path}")
    expect(page).to_have_url(f"{base_url}/login/?next={next_path}")
    page.get_by_label("Username").fill(JOURNEY_USER)
    page.get_by_label("Password").fill(JOURNEY_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{base_url}{next_path}")


def snapshot(page: Page, name: str) -> None:
    """Screenshots for a person to look at, when PANEL_SCREENSHOTS names a directory."""
    directory = os.environ.get("PANEL_SCREENSHOTS")
    if directory:
        page.screenshot(path=f"{directory}/{name}.png", full_page=True)
