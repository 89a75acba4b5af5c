"""Before a cluster is deleted: no benchmark of it may outlive its server.

Registered with ``panel.clusters.hooks.register_before_teardown`` (``BenchmarksConfig.ready``), so
the cluster services reach it without importing benchmarks. Queued runs are cancelled (no worker
picks them up), running ones cancelled and their pgbench process group stopped, data sets being
initialised failed with the reason and their ``pgbench -i`` stopped.
"""

from __future__ import annotations

from django.utils.translation import gettext as _

from benchmarks.engine import runner
from benchmarks.models import BenchmarkRun, DataSet, InvalidTransition, JobStatus, RunStatus
from benchmarks.services.config import HOSTNAME
from panel.clusters.models import Cluster


def stop_cluster_work(cluster: Cluster) -> int:
    """Cancel the cluster's queued and running runs and data set initialisations; how many."""
    stopped = 0
    for run in BenchmarkRun.objects.filter(cluster=cluster, status__in=RunStatus.ACTIVE):
        try:
            run.cancel()
        except InvalidTransition:
            continue  # it finished meanwhile
        run.refresh_from_db(fields=["pgbench_pid", "worker_hostname"])
        if run.worker_hostname in ("", HOSTNAME):
            runner.kill_group(run.pgbench_pid, grace_s=1.5)
        stopped += 1
    for dataset in DataSet.objects.filter(cluster=cluster, status__in=(JobStatus.QUEUED, JobStatus.RUNNING)):
        try:
            dataset.fail(_("The cluster was deleted."))
        except InvalidTransition:
            continue
        # pgbench -i runs in the worker that started it; a pid on another machine is not ours, and
        # kill_group refuses any process that is not pgbench.
        runner.kill_group(dataset.pgbench_pid, grace_s=1.5)
        stopped += 1
    return stopped
