"""pgbench jobs: data sets (``pgbench -i``), runs with their live samples and errors, and sweeps.

A job is a row with a state machine; Celery only carries its id. Transitions are conditional
updates (``filter(pk=…, status__in=allowed).update(…)``), so two processes racing on one row
(a worker finishing, a user cancelling, the reaper) cannot both win.
"""

from benchmarks.models.datasets import DataSet
from benchmarks.models.runs import BenchmarkRun, RunError, RunSample, Sweep
from benchmarks.models.status import InvalidTransition, JobStatus, RunStatus

__all__ = [
    "BenchmarkRun",
    "DataSet",
    "InvalidTransition",
    "JobStatus",
    "RunError",
    "RunSample",
    "RunStatus",
    "Sweep",
]
