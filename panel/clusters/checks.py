"""Start-up checks: the data directory must be reachable by the user that runs PostgreSQL."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Error, register


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
    from panel.clusters.engine.postgres import EngineError, os_user

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
