"""The states of benchmark jobs (data sets and runs), and the error of a transition a row refused."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import models
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines


class InvalidTransition(Exception):
    """The row was not in a state that allows the requested change (someone else moved it)."""


class JobStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    ERRORED = "errored", _("Errored")

    TERMINAL: ClassVar[frozenset[str]]


JobStatus.TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.ERRORED})


class Engine:
    """The names of the built-in load generators. A run's or a data set's ``engine`` is any name
    in the registry (``benchmarks.lib.engines.ENGINES``, the fields' choices); their data sets
    differ (pgbench's ``pgbench_*`` tables, sysbench's ``sbtestN``): a run uses its engine's."""

    PGBENCH = engines.PGBENCH
    SYSBENCH = engines.SYSBENCH


class RunStatus(models.TextChoices):
    QUEUED = "queued", _("Queued")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    COMPLETED_WITH_ERRORS = "completed_with_errors", _("Completed with errors")
    FAILED = "failed", _("Failed")
    CANCELLED = "cancelled", _("Cancelled")
    ERRORED = "errored", _("Errored")

    ACTIVE: ClassVar[frozenset[str]]
    TERMINAL: ClassVar[frozenset[str]]
    # What each status means to the person reading the run page.
    MEANING: ClassVar[dict[str, Any]]


RunStatus.ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
RunStatus.TERMINAL = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.COMPLETED_WITH_ERRORS,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.ERRORED,
    }
)
RunStatus.MEANING = {
    RunStatus.QUEUED: _("Waiting for its turn: runs on one cluster execute one at a time."),
    # The engine's own words first (Engine.status_meaning: pgbench's and sysbench's exit codes).
    RunStatus.RUNNING: _("The benchmark is running."),
    RunStatus.SUCCEEDED: _("The benchmark ran to the end."),
    RunStatus.COMPLETED_WITH_ERRORS: _("The benchmark ran but stopped on errors."),
    RunStatus.FAILED: _("The run could not start or did not finish (see the reason)."),
    RunStatus.CANCELLED: _("Stopped on request; the samples so far are kept."),
    RunStatus.ERRORED: _("The panel itself failed while running it (a bug: see the traceback)."),
}
