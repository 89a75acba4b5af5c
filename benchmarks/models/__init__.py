"""Benchmark jobs (pgbench or sysbench): data sets (``pgbench -i``, ``sysbench prepare``), runs with their live samples and errors, and sweeps.

A job is a row with a state machine; Celery only carries its id. Transitions are conditional
updates (``filter(pk=…, status__in=allowed).update(…)``), so two processes racing on one row
(a worker finishing, a user cancelling, the reaper) cannot both win.
"""

from benchmarks.models.datasets import DataSet
from benchmarks.models.runs import BenchmarkRun, RunError, RunSample, Sweep, SweepKind
from benchmarks.models.status import Engine, InvalidTransition, JobStatus, RunStatus

__all__ = [
    "BenchmarkRun",
    "DataSet",
    "Engine",
    "InvalidTransition",
    "JobStatus",
    "RunError",
    "RunSample",
    "RunStatus",
    "Sweep",
    "SweepKind",
]
