"""What the kernel says about the pgbench a test makes the panel spawn: who it runs as, where,
with what environment (issue 10, row 5: pgbench runs as ``PANEL_BENCH_USER``)."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import psutil
import pytest

from benchmarks.engine import runner


def watch_pgbench(found: list[dict[str, object]], stop: threading.Event) -> None:
    """Record what the kernel says about the pgbench this process spawns (no database access)."""
    me = psutil.Process()
    while not stop.is_set() and not found:
        for child in me.children(recursive=True):
            try:
                with child.oneshot():
                    if child.name() != "pgbench" or child.status() == psutil.STATUS_ZOMBIE:
                        continue
                    cwd = child.cwd()
                    info = os.stat(cwd)
                    snapshot = {
                        "uids": tuple(child.uids()),
                        "gids": set(child.gids()),
                        "cwd": cwd,
                        "cwd_mode": stat.S_IMODE(info.st_mode),
                        "cwd_uid": info.st_uid,
                        "environ": child.environ(),
                        "cmdline": child.cmdline(),
                        "cwd_files": sorted(os.listdir(cwd)),
                    }
                if not snapshot["cmdline"]:
                    # Caught inside its execve: the kernel names it pgbench before it has set
                    # up the new stack, whose arguments and environment read empty until then.
                    continue
                if child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
                    found.append(snapshot)  # still alive after the reads: they describe it
                    break
            except (psutil.Error, OSError):
                continue
        time.sleep(0.05)


class SpawnSpy:
    """Wraps runner.LoadProcess to record who each spawned pgbench runs as (it still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.uids: list[tuple[int, int, int]] = []
        self.workdirs: list[Path] = []
        original = runner.LoadProcess
        spy = self

        class Recording(original):  # type: ignore[misc,valid-type]
            def __init__(self, *args: object, **kwargs: object) -> None:
                super().__init__(*args, **kwargs)  # type: ignore[arg-type]
                spy.workdirs.append(Path(str(kwargs["cwd"])))
                # Not reaped until the caller polls it, so even an exited pgbench still answers.
                spy.uids.append(tuple(psutil.Process(self.pid).uids()))  # type: ignore[arg-type]

        monkeypatch.setattr(runner, "LoadProcess", Recording)
