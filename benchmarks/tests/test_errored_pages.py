"""A run or a data set that crashed in the panel (``errored``): its page says so and what to do,
never the traceback, which names the panel's files and the server's paths (issue 38). A run that
pgbench itself ended still shows pgbench's words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from benchmarks.models import DataSet, JobStatus, RunStatus
from benchmarks.tests.test_views_pages import RESERVED, make_run, run_url

PATH = "/var/lib/pgpanel/clusters/0b3c/pgdata"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/pgpanel/benchmarks/services/execute.py", line 120, in execute\n'
    "    self._run()\n"
    f"FileNotFoundError: [Errno 2] No such file or directory: '{PATH}/txlog.1'"
)


@pytest.mark.django_db
def test_an_errored_run_page_shows_no_traceback(owner_client, cluster_row):
    run = make_run(cluster_row, status=RunStatus.ERRORED, summary=None, error_message=TRACEBACK)

    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()

    assert "The panel failed while running it" in page
    assert "the panel&#x27;s log holds the traceback for an administrator" in page
    assert "Traceback" not in page and "FileNotFoundError" not in page and PATH not in page
    assert "/srv/pgpanel" not in page


@pytest.mark.django_db
def test_a_run_pgbench_ended_still_shows_pgbenchs_words(owner_client, cluster_row):
    run = make_run(
        cluster_row,
        status=RunStatus.FAILED,
        exit_code=1,
        summary=None,
        error_message="pgbench could not start (exit code 1)",
        first_error=RESERVED,
    )

    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()

    assert "remaining connection slots are reserved" in page


@pytest.mark.django_db
def test_an_errored_data_set_shows_no_traceback(owner_client, cluster_row):
    DataSet.objects.create(
        cluster=cluster_row, database="defaultdb", scale=10, status=JobStatus.ERRORED, error_message=TRACEBACK
    )

    page = owner_client.get(reverse("benchmarks:tab", args=[cluster_row.pk])).content.decode()

    assert "Initialisation failed" in page
    assert "the panel's log holds the traceback for an administrator" in page
    assert "Traceback" not in page and PATH not in page and "/srv/pgpanel" not in page
