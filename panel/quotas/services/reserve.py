"""The node's emergency reserve: a preallocated file on the volume of the data directory, so
that when the volume fills up anyway (a writer faster than one measuring cycle) there are
``PANEL_DISK_RESERVE_MB`` to give back at once: enough for a stopped cluster to start and its
owner to delete data. Released on demand; made again once the volume is back under its low
watermark."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from django.conf import settings


def path() -> Path:
    return Path(settings.PANEL_DATA_DIR) / "reserve" / "emergency-reserve"


def size() -> int:
    try:
        return path().stat().st_size
    except FileNotFoundError:
        return 0


def volume_percent(where: Path) -> float:
    usage = shutil.disk_usage(where)
    return 100.0 * usage.used / usage.total if usage.total else 0.0


def ensure() -> bool:
    """Make the reserve when it is missing and the volume has room for it below its low
    watermark; True when it was made."""
    wanted = settings.PANEL_DISK_RESERVE_MB * 1024 * 1024
    target = path()
    if not wanted or target.exists():
        return False
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    usage = shutil.disk_usage(target.parent)
    if 100.0 * (usage.used + wanted) / usage.total >= settings.PANEL_VOLUME_WRITABLE_PERCENT:
        return False
    tmp = target.with_name(".emergency-reserve.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.posix_fallocate(fd, 0, wanted)  # blocks really taken, not a sparse file
    except OSError:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        return False
    os.close(fd)
    tmp.rename(target)
    return True


def release() -> int:
    """Give the reserve back to the volume; returns the bytes freed."""
    freed = size()
    path().unlink(missing_ok=True)
    return freed
