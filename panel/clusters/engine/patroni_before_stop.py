"""Forwarding script (issue 40): Patroni configurations written before the standbys
room name this path (its ``before_stop`` script); the script itself is
``panel/clusters/standbys/engine/patroni_before_stop.py``. A member's configuration is written again only
when something else changes, so this path keeps working. Runs with ``python -I`` like the script
itself: it imports nothing of the panel."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "standbys" / "engine" / "patroni_before_stop.py"
    runpy.run_path(str(target), run_name="__main__")
