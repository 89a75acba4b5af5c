"""What Celery beat sends, and how often (the settings' CELERY_BEAT_SCHEDULE).

Beat runs anywhere and touches no cluster: each periodic job goes to ``default`` as a fan-out,
which sends one message per node with a living agent to that node's tasks queue
(panel/clusters/tasks.py); a message a busy or dead node did not take in time expires. Task names
are strings here: the settings import no app.
"""

from __future__ import annotations

from typing import Any


def _fan_out(task: str, seconds: float, *queue: str) -> dict[str, Any]:
    """``task`` sent to every node with a living agent every ``seconds`` (to its ``queue``, the
    tasks queue unless named); a message not taken before the next one is sent expires."""
    return {
        "task": "panel.clusters.tasks.fan_out",
        "args": (task, float(seconds), *queue),
        "schedule": float(seconds),
        "options": {"expires": float(seconds)},
    }


def beat_schedule(
    reconcile_seconds: int, metrics_interval: int, logsink_seconds: int = 10
) -> dict[str, dict[str, Any]]:
    """Every periodic job, with the reconciler's, the collection's and log forwarding's periods
    (seconds)."""
    return {
        "reconcile-clusters": _fan_out("panel.clusters.tasks.reconcile", reconcile_seconds),
        "reap-benchmarks": _fan_out("benchmarks.tasks.reap", 15),
        # A cycle that finds the previous one still queued is dropped rather than piled up.
        "collect-metrics": _fan_out("panel.insights.tasks.collect", metrics_interval),
        "rollup-metrics": {"task": "panel.insights.tasks.rollup", "schedule": 300.0},
        # Backups: each node takes the day's backup of its clusters once PANEL_BACKUP_HOUR has passed
        # (and a first one of a cluster that has none), checks archiving, expires kept repositories.
        "backups": _fan_out("panel.backups.tasks.periodic", 600),
        # Log forwarding: each node sends its clusters' new log entries to their sinks (on the
        # queue of tenants' work: a slow sink holds up no control work).
        "forward-logs": _fan_out("panel.logsink.tasks.forward", logsink_seconds, "work"),
        # Maintenance windows (versions checked, updates installed in their hour) and storage
        # autoscale, on each cluster's node.
        "managed-round": _fan_out("panel.managed.tasks.periodic", 300),
        # Storage quotas: measured and judged on every collection cycle, on each cluster's node.
        "measure-quotas": _fan_out("panel.quotas.tasks.measure", metrics_interval),
    }
