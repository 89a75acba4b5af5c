"""Production settings: ``manage.py check --deploy`` is clean when the panel is served over TLS
(PANEL_HTTPS=1, DEBUG off), and the same check finds the holes when it is not, so it checks."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="pgpanel-deploy-", dir="/tmp") as data_dir:
        os.chmod(data_dir, 0o711)  # traversable by PostgreSQL's user, not listable by others
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("PANEL_", "DJANGO_", "DATABASE_URL", "REDIS_URL"))
        }
        clean |= {"DJANGO_SETTINGS_MODULE": "panel.settings", "PANEL_DATA_DIR": data_dir, **env}
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=clean,
            capture_output=True,
            text=True,
            timeout=120,
        )


def test_check_deploy_is_clean_with_production_settings() -> None:
    result = _manage("check", "--deploy", "--fail-level", "WARNING", PANEL_HTTPS="1", DJANGO_DEBUG="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_check_deploy_names_what_is_missing_without_tls() -> None:
    result = _manage("check", "--deploy", DJANGO_DEBUG="0")
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


SHOW = (
    "from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
    "s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
    "getattr(s, 'SECURE_PROXY_SSL_HEADER', None), s.SESSION_COOKIE_HTTPONLY, s.X_FRAME_OPTIONS, "
    "s.SECURE_CONTENT_TYPE_NOSNIFF, s.SECURE_REFERRER_POLICY)"
)


def test_https_behind_a_proxy_trusts_its_forwarded_proto_header() -> None:
    result = _manage("shell", "-c", SHOW, PANEL_HTTPS="1", PANEL_BEHIND_PROXY="1", PANEL_HSTS_SECONDS="600")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == (
        "True True True 600 True ('HTTP_X_FORWARDED_PROTO', 'https') True DENY True same-origin"
    )
    local = _manage("shell", "-c", SHOW)
    assert local.stdout.split("\n")[-2] == "False False False 0 True None True DENY True same-origin"
