"""What Celery beat sends, and how often (the settings' CELERY_BEAT_SCHEDULE).

Beat runs anywhere and touches no cluster: each periodic job goes to ``default`` as a fan-out,
which sends one message per node with a living agent to that node's tasks queue
(panel/clusters/tasks.py); a message a busy or dead node did not take in time expires. Task names
are strings here: the settings import no app.
"""

from __future__ import annotations

from typing import Any


def beat_schedule(
    reconcile_seconds: int, metrics_interval: int, logsink_seconds: int = 10
) -> dict[str, dict[str, Any]]:
    """Every periodic job, with the reconciler's, the collection's and log forwarding's periods
    (seconds)."""
    return {
        "reconcile-clusters": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.clusters.tasks.reconcile", float(reconcile_seconds)),
            "schedule": float(reconcile_seconds),
            "options": {"expires": float(reconcile_seconds)},
        },
        "reap-benchmarks": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("benchmarks.tasks.reap", 15.0),
            "schedule": 15.0,
            "options": {"expires": 15.0},
        },
        # A cycle that finds the previous one still queued is dropped rather than piled up.
        "collect-metrics": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.insights.tasks.collect", float(metrics_interval)),
            "schedule": float(metrics_interval),
            "options": {"expires": float(metrics_interval)},
        },
        "rollup-metrics": {"task": "panel.insights.tasks.rollup", "schedule": 300.0},
        # Backups: each node takes the day's backup of its clusters once PANEL_BACKUP_HOUR has passed
        # (and a first one of a cluster that has none), checks archiving, expires kept repositories.
        "backups": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.backups.tasks.periodic", 600.0),
            "schedule": 600.0,
            "options": {"expires": 600.0},
        },
        # Log forwarding: each node sends its clusters' new log entries to their sinks (on the
        # queue of tenants' work: a slow sink holds up no control work).
        "forward-logs": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.logsink.tasks.forward", float(logsink_seconds), "work"),
            "schedule": float(logsink_seconds),
            "options": {"expires": float(logsink_seconds)},
        },
        # Maintenance windows (versions checked, updates installed in their hour) and storage
        # autoscale, on each cluster's node.
        "managed-round": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.managed.tasks.periodic", 300.0),
            "schedule": 300.0,
            "options": {"expires": 300.0},
        },
        # Storage quotas: measured and judged on every collection cycle, on each cluster's node.
        "measure-quotas": {
            "task": "panel.clusters.tasks.fan_out",
            "args": ("panel.quotas.tasks.measure", float(metrics_interval)),
            "schedule": float(metrics_interval),
            "options": {"expires": float(metrics_interval)},
        },
    }
