"""Forwarding script (issue 40): Patroni configurations written before the standbys
room name this path (its ``on_role_change`` callback); the script itself is
``panel/clusters/standbys/engine/patroni_callback.py``. A member's configuration is written again only
when something else changes, so this path keeps working. Runs with ``python -I`` like the script
itself: it imports nothing of the panel."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "standbys" / "engine" / "patroni_callback.py"
    runpy.run_path(str(target), run_name="__main__")
