"""What every benchmark view needs: the run or sweep in the URL, if the user may see it."""

from __future__ import annotations

import uuid
from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from benchmarks.models import BenchmarkRun, Sweep
from benchmarks.services import pages


def get_run(request: HttpRequest, cluster_id: uuid.UUID, run_id: uuid.UUID) -> BenchmarkRun:
    """The run if its cluster is the one in the URL and the user may see it; a 404 otherwise."""
    # Signed in: LoginRequiredMiddleware lets no one else through to a view.
    runs = pages.runs_for(cast(User, request.user)).select_related("cluster")
    return get_object_or_404(runs, pk=run_id, cluster_id=cluster_id)


def get_sweep(request: HttpRequest, cluster_id: uuid.UUID, sweep_id: uuid.UUID) -> Sweep:
    sweeps = pages.sweeps_for(cast(User, request.user)).select_related("cluster")
    return get_object_or_404(sweeps, pk=sweep_id, cluster_id=cluster_id)


def int_param(request: HttpRequest, name: str) -> int:
    try:
        return max(0, int(request.GET.get(name, 0)))
    except ValueError:
        return 0
