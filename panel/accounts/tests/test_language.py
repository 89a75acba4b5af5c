"""Issue 18, item 3: the language menu, remembered per account, the browser's language as the
default, and dates and numbers formatted for the page's language."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone, translation

from benchmarks.services.read import live_figures
from panel.accounts.models import AccountSettings
from panel.accounts.services import set_account_language
from panel.api.models import ApiToken
from panel.api.services.tokens import create_token
from panel.core.errors import ServiceError

pytestmark = pytest.mark.django_db
PASSWORD = "language-password-1"
HTML_LANG = re.compile(r'<html lang="([a-z-]+)">')


@pytest.fixture
def user() -> User:
    return User.objects.create_user("sprache", "s@example.com", PASSWORD)


def page_language(response) -> str:
    return HTML_LANG.search(response.content.decode()).group(1)  # type: ignore[union-attr]


def logged_in(user: User, accept: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=accept)
    client.force_login(user)  # a real login (the user_logged_in signal), without the lock-out backend
    return client


def test_the_browsers_language_is_the_default(user: User) -> None:
    assert page_language(Client(HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").get("/login/")) == "de"
    assert page_language(Client(HTTP_ACCEPT_LANGUAGE="fr-FR,en;q=0.5").get("/login/")) == "en"
    assert page_language(logged_in(user, "de").get("/clusters/")) == "de"


def test_the_login_page_has_the_menu_and_switching_there_needs_no_account() -> None:
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    page = client.get("/login/").content.decode()
    assert 'action="/i18n/setlang/"' in page and 'value="de"' in page and "Deutsch" in page
    response = client.post("/i18n/setlang/", {"language": "de", "next": "/login/"})
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert page_language(client.get("/login/")) == "de"  # the cookie, over Accept-Language
    assert not AccountSettings.objects.exists()


def test_the_choice_is_remembered_for_the_account_on_its_next_login(user: User) -> None:
    client = logged_in(user, "en")
    page = client.get("/clusters/").content.decode()
    assert 'action="/i18n/setlang/"' in page  # the menu on every page
    response = client.post("/i18n/setlang/", {"language": "de", "next": "/clusters/"})
    assert response.status_code == 302 and response["Location"] == "/clusters/"
    assert AccountSettings.objects.get(user=user).language == "de"
    assert page_language(client.get("/clusters/")) == "de"
    # Another browser, which asks for English and has no cookie: the account's choice wins.
    assert page_language(logged_in(user, "en").get("/clusters/")) == "de"
    # And back.
    client.post("/i18n/setlang/", {"language": "en", "next": "/clusters/"})
    assert page_language(logged_in(user, "de").get("/clusters/")) == "en"


def test_an_unknown_language_changes_nothing(user: User) -> None:
    client = logged_in(user, "en")
    client.post("/i18n/setlang/", {"language": "xx", "next": "/clusters/"})
    assert not AccountSettings.objects.exists()
    assert page_language(client.get("/clusters/")) == "en"
    with pytest.raises(ServiceError) as refused:
        set_account_language(user, "klingon")
    assert refused.value.field == "language" and refused.value.code == "account.language_unknown"


def test_an_unsafe_next_is_not_followed(user: User) -> None:
    response = logged_in(user).post("/i18n/setlang/", {"language": "de", "next": "https://evil.example/"})
    assert "evil.example" not in response.get("Location", "")


def test_dates_on_pages_follow_the_language(user: User) -> None:
    created = dt.datetime(2026, 11, 24, 14, 3, tzinfo=dt.UTC)
    token, _secret = create_token(user, "ci", ["database:read"])
    ApiToken.objects.filter(pk=token.pk).update(created_at=created)
    english = logged_in(user, "en").get("/account/tokens/").content.decode()
    german = logged_in(user, "de").get("/account/tokens/").content.decode()
    assert "2026-11-24 14:03" in english and "24.11.2026" not in english
    assert "24.11.2026 14:03" in german and "2026-11-24" not in german


def test_live_run_figures_use_the_languages_separators() -> None:
    class Run:
        duration_s = 60

    latest = {"tps": 12345.67, "latency_avg_ms": 1234.5, "p95_ms": 2.5, "failed": 0, "elapsed_s": 30.0}
    with translation.override("de"):
        german = live_figures(Run(), latest)  # type: ignore[arg-type]
    with translation.override("en"):
        english = live_figures(Run(), latest)  # type: ignore[arg-type]
    assert german["tps"] == "12.345,7" and german["latency"] == "1.234,50 ms" and german["p95"] == "2,50 ms"
    assert english["tps"] == "12,345.7" and english["latency"] == "1,234.50 ms"


def test_timestamps_stay_utc_whatever_the_language(user: User) -> None:
    with translation.override("de"):
        assert timezone.get_current_timezone_name() == "UTC"
