"""Cluster URLs (filled in by the views work)."""

from __future__ import annotations

app_name = "clusters"
urlpatterns: list = []
