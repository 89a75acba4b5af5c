"""Start-up checks: the data directory must be reachable by the user that runs PostgreSQL, the
panel's own files private to the panel, what the web server reads of the checkout readable by
it, and the broker protected by a password."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register

from panel import files


def untraversable_ancestors(path: Path, uid: int, gid: int) -> list[Path]:
    """Directories on the way to ``path`` that user ``uid`` (group ``gid``) cannot enter."""
    blocked = []
    for directory in [*reversed(path.parents), path]:
        try:
            st = directory.stat()
        except FileNotFoundError:
            break
        if st.st_uid == uid:
            ok = st.st_mode & stat.S_IXUSR
        elif st.st_gid == gid:
            ok = st.st_mode & stat.S_IXGRP
        else:
            ok = st.st_mode & stat.S_IXOTH
        if not ok:
            blocked.append(directory)
    return blocked


@register()
def check_data_dir(app_configs: Any, **kwargs: Any) -> list[Error]:
    if os.geteuid() != 0:
        return []
    from panel.core.runas import EngineError, os_user

    try:
        user = os_user()
    except EngineError as exc:
        return [Error(str(exc), id="clusters.E001")]
    blocked = untraversable_ancestors(Path(settings.PANEL_DATA_DIR), user.uid, user.gid)
    if blocked:
        return [
            Error(
                f"The data directory {settings.PANEL_DATA_DIR} is not reachable by the user "
                f"{user.name!r} that runs PostgreSQL: it cannot enter {', '.join(map(str, blocked))}.",
                hint="Set PANEL_DATA_DIR to a directory every user can traverse (e.g. /var/lib/pgpanel).",
                id="clusters.E002",
            )
        ]
    return []


@register()
def check_private_files(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """Repair the modes of the panel's files (panel/files.py); refuse what only a person can fix."""
    report = files.secure_data_dir(
        Path(settings.PANEL_DATA_DIR),
        getattr(settings, "PANEL_SQLITE_FILES", []),
        getattr(settings, "PANEL_WEB_GID", None),
    )
    repaired = [*files.repaired_at_start, *report.repaired]
    files.repaired_at_start.clear()  # said once per process
    messages: list[CheckMessage] = [
        Warning(
            f"Repaired: {line}",
            hint="Other local users could read it before; nothing more to do.",
            id="clusters.W010",
        )
        for line in repaired
    ]
    messages += [
        Error(problem.message, hint=f"Run: {problem.fix}", id="clusters.E010") for problem in report.problems
    ]
    return messages


@register()
def check_checkout_shared(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """As root, the web server runs as PANEL_WEB_USER: what it reads of the checkout (the compiled
    catalogues above all) is made readable at start (panel/files.py); say what was, refuse what
    cannot be."""
    if os.geteuid() != 0:
        return []
    report = files.share_checkout_with_web(Path(settings.BASE_DIR))
    repaired = [*files.shared_at_start, *report.repaired]
    files.shared_at_start.clear()  # said once per process
    messages: list[CheckMessage] = [
        Warning(
            f"Repaired: {line}",
            hint=f"The web server, running as {settings.PANEL_WEB_USER}, could not read it before.",
            id="clusters.W012",
        )
        for line in repaired
    ]
    messages += [
        Error(problem.message, hint=f"Run: {problem.fix}", id="clusters.E012") for problem in report.problems
    ]
    return messages


def redis_url_without_password(url: str) -> str | None:
    """The host:port of a TCP Redis URL that carries no password, else None."""
    parts = urlsplit(url)
    if parts.scheme not in {"redis", "rediss"} or parts.password:
        return None
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"


REDIS_WITHOUT_PASSWORD = (
    "REDIS_URL has no password ({where}): every local user, and for a host other than loopback "
    "anyone who reaches it over the network, can send the Celery workers tasks (start, stop, delete "
    "clusters; run benchmarks)."
)
REDIS_HINT = (
    "Set `requirepass` in that Redis and put the password in REDIS_URL "
    "(redis://:PASSWORD@HOST:PORT/0), or unset REDIS_URL: `make run` then starts a private Redis "
    "with a generated password kept in <data dir>/keys/redis_password."
)


@register()
def check_redis_password(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    # A warning, not an error: an external broker is the operator's choice (Docker's compose file
    # runs one in the panel's own network namespace), and loopback alone protects nothing from
    # local users, so every password-less TCP Redis gets the same warning.
    where = redis_url_without_password(settings.REDIS_URL)
    if where is None:
        return []
    return [Warning(REDIS_WITHOUT_PASSWORD.format(where=where), hint=REDIS_HINT, id="clusters.W011")]


@register()
def check_vip_interface(app_configs: Any, **kwargs: Any) -> list[Error]:
    """PANEL_VIP_INTERFACE is a name a new node's row takes (env_str read it as it is)."""
    from panel.clusters.standbys.lib.vip import check_interface

    try:
        check_interface(settings.PANEL_VIP_INTERFACE)
    except ValueError as exc:
        return [Error(f"PANEL_VIP_INTERFACE: {exc}", id="clusters.E013")]
    return []


# HAProxy (a cluster with standbys) refuses a stats socket path over 97 bytes; the panel's is
# <data dir>/clusters/<32 hex digits>/run/haproxy.sock, 59 bytes after the data directory.
HAPROXY_SOCKET_MAX = 97
HAPROXY_SOCKET_TAIL = len("/clusters/") + 32 + len("/run/haproxy.sock")


@register()
def check_data_dir_length(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    longest = HAPROXY_SOCKET_MAX - HAPROXY_SOCKET_TAIL
    if len(str(settings.PANEL_DATA_DIR)) <= longest:
        return []
    return [
        Warning(
            f"PANEL_DATA_DIR is {len(str(settings.PANEL_DATA_DIR))} characters long: HAProxy cannot open its "
            f"socket under it, so clusters with standbys will not start (at most {longest}).",
            hint="Set PANEL_DATA_DIR to a shorter path (e.g. /var/lib/pgpanel).",
            id="clusters.W014",
        )
    ]
