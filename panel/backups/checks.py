"""Start-up check: pgBackRest must be installed where clusters run, or they run without archiving."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Warning, register

from panel.backups.engine import runner as engine
from panel.core.runas import EngineError


@register()
def check_pgbackrest(app_configs: Any, **kwargs: Any) -> list[Warning]:
    if settings.PANEL_PROCESS_ROLE == "web":
        return []  # the web runs no cluster
    try:
        engine.program()
    except EngineError as exc:
        return [
            Warning(
                f"{exc} Clusters run without WAL archiving and cannot be backed up.",
                hint="apt-get install pgbackrest (scripts/bootstrap.sh does), or set PANEL_PGBACKREST.",
                id="backups.W001",
            )
        ]
    return []
