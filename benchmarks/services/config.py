"""Settings the benchmark services read, and the facts about this process they share."""

from __future__ import annotations

import socket

from django.conf import settings

SCRIPT_FILE = "custom.sql"


def _setting(name: str, default: float) -> float:
    value = getattr(settings, name, default)
    if not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"settings.{name} must be a positive number, not {value!r}")
    return float(value)


def heartbeat_interval() -> float:
    return _setting("BENCHMARK_HEARTBEAT_SECONDS", 3)


def worker_lost_after() -> float:
    return _setting("BENCHMARK_WORKER_LOST_SECONDS", 45)


def requeue_after() -> float:
    return _setting("BENCHMARK_REQUEUE_SECONDS", 15)


def percentile_budget() -> float:
    """Logged transactions per second the percentile reader is sized for (sets the sampling rate)."""
    return _setting("BENCHMARK_PERCENTILE_TX_PER_SECOND", 2000)


def run_margin() -> float:
    """Seconds a run may take beyond its duration (connecting, vacuum, summary) before it is stopped."""
    return _setting("BENCHMARK_RUN_MARGIN_SECONDS", 120)


HOSTNAME = socket.gethostname()
