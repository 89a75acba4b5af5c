"""`manage.py bench …`: pgbench and sysbench data sets and runs from the command line, through the
same services (``--engine sysbench`` for sysbench's ``prepare``, ``run`` and ``cleanup``).

``bench sweep`` plans client counts × targets (``--targets direct,POOL``) or × sizes of one pool
(``--pool-sizes 5,10,20 [--pool POOL]``); ``sweep-show`` prints its grid and findings.

``bench run --wait``, ``bench init --wait`` and ``bench sweep --wait`` execute in the foreground (no worker needed);
without ``--wait`` the job is queued for a Celery worker. Clusters are named by their name; when
several users own a cluster of that name, ``--owner`` picks one.
"""

from __future__ import annotations

from django.core.management.base import CommandParser

from benchmarks.management import bench_arguments
from benchmarks.management.bench_sweeps import SweepSubcommands


class Command(SweepSubcommands):
    help = "Initialise pgbench or sysbench data sets and run, list, show, cancel and export benchmark runs."

    def add_arguments(self, parser: CommandParser) -> None:
        bench_arguments.add_arguments(parser)
