"""Issue 11, item 12: watching a run must not cost the run its throughput. The run page polls once
a second with one small request (new samples, the status card's figures, a state token), answered
204 when nothing changed; its HTML part is re-fetched only when that token changes."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape

from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from benchmarks.models import BenchmarkRun, RunSample, RunStatus
from benchmarks.tests.test_views_pages import HTMX, make_run, run_url
from panel.clusters.tests.conftest import make_cluster_row

# Session, user, run, samples: what one poll of a running run needs. The page used to poll twice a
# second (the live partial: 5 queries; the chart data: 4).
MAX_QUERIES_PER_SECOND = 5


@contextmanager
def counted() -> Iterator[list[str]]:
    """The SQL run inside the block (CaptureQueriesContext sees nothing with this test setup)."""
    seen: list[str] = []

    def record(execute, sql, params, many, context):  # noqa: ANN001, ANN202
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def running_run(owner: User, samples: int = 30) -> BenchmarkRun:
    return make_run(
        make_cluster_row(owner), samples=samples, status=RunStatus.RUNNING, summary=None, finished_at=None
    )


def test_the_poll_sends_only_the_samples_after_after_and_the_figures(
    owner_client: Client, owner: User
) -> None:
    run = running_run(owner)
    body = owner_client.get(run_url("benchmarks:run-samples", run) + "?after=27").json()
    assert [sample["seq"] for sample in body["samples"]] == [28, 29, 30]
    assert body["state"].startswith("running.")
    assert body["figures"]["tps"] == "2,030.0"
    assert body["figures"]["elapsed"] == "30 s of 60 s"
    assert body["figures"]["progress"] == 50


def test_nothing_new_is_a_204_and_a_change_is_not(owner_client: Client, owner: User) -> None:
    run = running_run(owner)
    url = run_url("benchmarks:run-samples", run)
    state = owner_client.get(url + "?after=30").json()["state"]
    # What the page shows carries the same token.
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    assert f'data-state="{state}"' in page

    nothing = owner_client.get(f"{url}?after=30&state={state}")
    assert nothing.status_code == 204
    assert nothing.content == b""

    # A new sample: sent, with the figures after it.
    RunSample.objects.create(
        run=run,
        seq=31,
        elapsed_s=31.0,
        tps=1.5,
        latency_avg_ms=2.0,
        latency_stddev_ms=0.1,
        received_at=timezone.now(),
    )
    body = owner_client.get(f"{url}?after=30&state={state}").json()
    assert [sample["seq"] for sample in body["samples"]] == [31]
    assert body["figures"]["tps"] == "1.5"

    # A warning added while it runs (item 1): the token changes, so the page re-fetches its live part.
    run.warnings = ["Closed 22 idle server connections that connection pools were holding."]
    run.save(update_fields=["warnings"])
    changed = owner_client.get(f"{url}?after=31&state={state}")
    assert changed.status_code == 200
    assert changed.json()["state"] != state

    # Over: always answered, so the page sees the end and stops.
    run.status = RunStatus.SUCCEEDED
    run.save(update_fields=["status"])
    final_state = owner_client.get(f"{url}?after=31").json()["state"]
    over = owner_client.get(f"{url}?after=31&state={final_state}")
    assert over.status_code == 200
    assert over.json()["terminal"] is True


def test_one_second_of_watching_is_one_request_of_few_queries(owner_client: Client, owner: User) -> None:
    run = running_run(owner)
    page = owner_client.get(run_url("benchmarks:run-detail", run)).content.decode()
    # Every request the page repeats each second: htmx pollers, and the charts' data endpoint.
    polled = [
        (unescape(url), HTMX) for url in re.findall(r'hx-get="([^"]+)"[^>]*hx-trigger="every [^"]*"', page)
    ]
    data_url = unescape(re.search(r'data-bench-run-charts data-url="([^"]+)"', page).group(1))
    polled.append((f"{data_url}?after=30", {}))

    queries = 0
    for url, headers in polled:
        owner_client.get(url, headers=headers)  # warm
        with counted() as seen:
            owner_client.get(url, headers=headers)
        queries += len(seen)
    assert queries <= MAX_QUERIES_PER_SECOND
    assert len(polled) == 1, polled


def test_the_live_part_is_fetched_on_a_state_change_not_every_second(
    owner_client: Client, owner: User
) -> None:
    run = running_run(owner)
    partial = owner_client.get(run_url("benchmarks:run-detail", run), headers=HTMX).content.decode()
    head = partial.lstrip().split(">", 1)[0]
    assert 'hx-trigger="bench-run-changed"' in head
    assert "every" not in head
