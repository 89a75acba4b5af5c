"""Debian's Chromium and the flags every headless run here starts it with: the browser tests, the
screenshots and the tutorial walk (Django-free, so that a script outside the tests can import it)."""

from __future__ import annotations

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
