"""The API documentation page (/v2/docs): public like the schema it renders, made of the panel's
own static files only, under the panel's strict Content-Security-Policy."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

ASSET = re.compile(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=\"([^\"]+)\"", re.I)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)


def test_the_page_answers_without_a_login_and_uses_only_local_static_files(client: Client) -> None:
    response = client.get("/v2/docs")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assets = ASSET.findall(page)
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in assets
    assert "/static/vendor/swagger-ui/swagger-ui.css" in assets
    assert "/static/js/api-docs.js" in assets
    for url in assets:
        assert url.startswith("/static/"), url  # no CDN, no other host
        assert client.get(url).status_code == 200, url
    assert not INLINE_SCRIPT.search(page)
    assert not re.search(r"\sstyle=\"", page)


def test_the_schema_it_points_at_loads(client: Client) -> None:
    page = client.get("/v2/docs").content.decode()
    schema_url = re.search(r'id="swagger-ui" data-schema-url="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    assert schema_url == "/v2/openapi.json"
    schema = client.get(schema_url).json()
    summaries = {op["summary"] for path in schema["paths"].values() for op in path.values()}
    assert "List database clusters" in summaries
    # Authorize on the page asks for what the API takes: a bearer token.
    assert {"type": "http", "scheme": "bearer"}.items() <= schema["components"]["securitySchemes"][
        "TokenAuth"
    ].items()


def test_the_page_has_the_panels_strict_policy(client: Client) -> None:
    policy = client.get("/v2/docs")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "connect-src 'self'" in policy
    assert "unsafe" not in policy


def test_it_takes_get_only_and_a_post_is_refused_in_the_apis_shape(client: Client) -> None:
    response = client.post("/v2/docs")
    assert response.status_code == 405
    assert set(response.json()) == {"id", "message", "request_id"}
    assert client.head("/v2/docs").status_code == 200


def test_signed_in_the_page_sits_in_the_panel(owner_client: Client, client: Client) -> None:
    mine = owner_client.get("/v2/docs").content.decode()
    alone = client.get("/v2/docs").content.decode()
    assert "panel-sidebar" in mine and reverse("api:tokens") in mine
    assert "panel-sidebar" not in alone
    assert 'id="swagger-ui"' in mine and 'id="swagger-ui"' in alone


def test_the_tokens_page_and_the_user_menu_link_it(owner_client: Client) -> None:
    docs = reverse("api-docs")
    assert f'href="{docs}"' in owner_client.get(reverse("api:tokens")).content.decode()
    assert f'href="{docs}"' in owner_client.get(reverse("clusters:list")).content.decode()
