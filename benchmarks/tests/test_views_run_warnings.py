"""Issue 11, item 1: the warning a direct run adds once it starts ("Closed 22 idle server
connections…") reaches the run page through its 1-second poll, without a reload."""

from __future__ import annotations

from django.contrib.auth.models import User

from benchmarks.models import RunStatus
from benchmarks.tests.test_views_pages import HTMX, make_run, run_url
from panel.clusters.tests.conftest import make_cluster_row

CLOSED = "Closed 22 idle server connections that connection pools were holding."


def test_a_warning_added_while_the_run_runs_appears_in_the_polled_part(owner_client, owner: User) -> None:
    run = make_run(
        make_cluster_row(owner), samples=1, status=RunStatus.RUNNING, summary=None, finished_at=None
    )
    url = run_url("benchmarks:run-detail", run)
    assert CLOSED not in owner_client.get(url, headers=HTMX).content.decode()

    # What benchmarks.services.execute does for a direct run when pools held idle servers.
    run.warnings = [CLOSED]
    run.save(update_fields=["warnings"])
    partial = owner_client.get(url, headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<div id="bench-run-live"')
    assert CLOSED in partial
    # Shown once on the full page, not twice.
    assert owner_client.get(url).content.decode().count(CLOSED) == 1
