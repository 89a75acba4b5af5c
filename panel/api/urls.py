"""The account's API tokens page (namespace "api"); the API itself is under /v2/ (panel/urls.py)."""

from __future__ import annotations

from django.urls import path

from panel.api import views

app_name = "api"

urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]
