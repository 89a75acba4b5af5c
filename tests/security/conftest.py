"""Fixtures more than one security module uses."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def fresh_lib(settings: Any) -> Iterator[Path]:
    """A data directory with no guard built yet (under /tmp, traversable like the real one): its
    ``lib`` folder, where the guard is built."""
    data_dir = Path(tempfile.mkdtemp(prefix="pgpanel-guard-", dir="/tmp"))
    data_dir.chmod(0o755)
    settings.PANEL_DATA_DIR = data_dir
    yield data_dir / "lib"
    shutil.rmtree(data_dir, ignore_errors=True)
