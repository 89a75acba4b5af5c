"""The node agent of one machine, for a panel spread over several (issue 13's nodes).

Runs this machine's four Celery workers (scripts/children.py: node_agent_children) under the same
supervision as `make run` (restarts with a back-off, stops together on Ctrl-C or SIGTERM). The
agent registers its node (PANEL_NODE_NAME) when it starts, with this machine's memory and cores
unless `manage.py node add` recorded it first, and sends a heartbeat every
PANEL_NODE_HEARTBEAT_SECONDS. Run it as root (each cluster gets a system user of its own) with the
settings every machine of the panel shares:

    PANEL_NODE_NAME=db2 PANEL_PUBLIC_HOST=db2.example.net PANEL_LISTEN_ADDRESSES='*' \\
    DATABASE_URL=postgresql://panel:…@meta/panel REDIS_URL=redis://:…@broker:6379/0 \\
    DJANGO_SECRET_KEY=… PANEL_ENCRYPTION_KEY=… .venv/bin/python scripts/node_agent.py

`make run` starts the same four workers for the node `local` beside the web server and beat.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from children import ROOT, node_agent_children, run_until_stopped, say, supervisor_env  # noqa: E402


def main() -> int:
    env = supervisor_env()
    node = env.get("PANEL_NODE_NAME") or "local"
    migrated = subprocess.run([sys.executable, "manage.py", "migrate", "--check"], cwd=ROOT, env=env)
    if migrated.returncode != 0:
        say("agent", "the panel's database is not migrated yet: run manage.py migrate (the web does) first")
        return 1
    say(
        "agent",
        f"node agent of {node}: queues node.{node}, node.{node}.tasks, node.{node}.work and node.{node}.backups",
    )
    return run_until_stopped(node_agent_children(sys.executable, node), env)


if __name__ == "__main__":
    sys.exit(main())
