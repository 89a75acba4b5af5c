"""The sweep page's charts in a real browser: one line per target or pool size, the best cell drawn
as a larger diamond; and the sweep form showing the fields of the kind and engine chosen."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from benchmarks.models import Sweep
from benchmarks.tests.test_views_pages import make_run
from panel.clusters.tests.conftest import make_cluster_row
from panel.pools.models import ConnectionPool
from tests.browser.conftest import log_in

pytestmark = pytest.mark.integration

# What the page's chart holds: each line's label, and per point its x, y and drawn style.
CHART_STATE = """(kind) => {
  if (!window.Chart) { return null; }  // the page's deferred scripts have not run yet
  const chart = window.Chart.getChart(document.querySelector(`canvas[data-chart='${kind}']`));
  if (!chart || !chart.data.datasets.length) { return null; }
  return chart.data.datasets.map((dataset, i) => ({
    label: dataset.label,
    points: chart.getDatasetMeta(i).data.map((element, j) => ({
      x: dataset.data[j].x, y: dataset.data[j].y, style: element.options.pointStyle,
      radius: element.options.radius,
    })),
  }));
}"""


def chart_state(page: Page, kind: str = "tps") -> list[dict]:
    page.wait_for_function(f"() => ({CHART_STATE})('{kind}') !== null")
    return page.evaluate(CHART_STATE, kind)


def test_the_targets_chart_has_a_line_per_target_and_marks_the_best_cell(
    live_server, journey_user: User, page: Page
) -> None:
    cluster = make_cluster_row(journey_user, name="db-sweep-chart")
    sweep = Sweep.objects.create(
        cluster=cluster, clients_list=[10, 50],
        targets=[{"kind": "direct"}, {"kind": "pool", "pool": "test-pool"}],
    )  # fmt: skip
    for index, (pool_name, clients, tps) in enumerate(
        [("", 10, 2000.0), ("test-pool", 10, 1500.0), ("", 50, 2100.0), ("test-pool", 50, 2600.0)]
    ):
        make_run(
            cluster, sweep=sweep, sweep_index=index, clients=clients, pool_name=pool_name,
            summary={"tps": tps, "latency_avg_ms": 4.0},
        )  # fmt: skip
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/sweeps/{sweep.pk}/")
    lines = chart_state(page)
    assert [line["label"] for line in lines] == ["direct", "pool test-pool"]
    assert [(p["x"], p["y"]) for p in lines[1]["points"]] == [(10, 1500.0), (50, 2600.0)]
    styles = [(line["label"], p["x"], p["style"]) for line in lines for p in line["points"]]
    assert [s for s in styles if s[2] == "rectRot"] == [("pool test-pool", 50, "rectRot")]
    assert lines[1]["points"][1]["radius"] > lines[0]["points"][1]["radius"]
    expect(page.locator("[data-sweep-sentence]")).to_contain_text("Through the pool from 50 clients on")
    expect(page.locator("td[data-best]")).to_contain_text("2,600.0 TPS")


def test_the_pool_size_chart_has_a_line_per_size(live_server, journey_user: User, page: Page) -> None:
    cluster = make_cluster_row(journey_user, name="db-size-chart")
    sweep = Sweep.objects.create(
        cluster=cluster, clients_list=[10], kind="pool_sizes", pool_sizes=[5, 20], pool_name="test-pool",
        original_pool_size=40, targets=[{"kind": "pool", "pool": "test-pool"}],
    )  # fmt: skip
    for index, (size, tps) in enumerate([(5, 900.0), (20, 1200.0)]):
        make_run(
            cluster, sweep=sweep, sweep_index=index, clients=10, pool_name="test-pool", pool_size=size,
            summary={"tps": tps, "latency_avg_ms": 4.0},
        )  # fmt: skip
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/sweeps/{sweep.pk}/")
    lines = chart_state(page)
    assert [line["label"] for line in lines] == ["size 5", "size 20"]
    assert [line["points"][0]["style"] for line in lines] == ["circle", "rectRot"]
    expect(page.get_by_text("TPS vs clients, by pool size")).to_be_visible()


def test_the_sweep_form_shows_the_fields_of_its_kind_and_engine(
    live_server, journey_user: User, page: Page
) -> None:
    cluster = make_cluster_row(journey_user, name="db-sweep-form")
    ConnectionPool.objects.create(cluster=cluster, name="test-pool", database="defaultdb", size=40)
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/benchmarks/")
    page.get_by_role("button", name="Plan a sweep").click()
    form = page.locator("#sweep-form")
    sizes = form.get_by_label("Pool sizes", exact=True)
    expect(form.get_by_text("Targets", exact=True)).to_be_visible()
    expect(sizes).to_be_hidden()
    form.get_by_label("Clients × pool sizes: one pool, resized between steps").check()
    expect(sizes).to_be_visible()
    expect(form.get_by_label("Pool to resize")).to_be_visible()
    expect(form.get_by_text("Targets", exact=True)).to_be_hidden()
    expect(form.get_by_text("40 of 97 pool connections used.")).to_be_visible()

    form.get_by_label("Engine", exact=True).select_option("sysbench")
    expect(form.get_by_label("Script", exact=True)).to_have_value("oltp_read_write")
    expect(form.get_by_label("Query mode", exact=True)).to_be_hidden()
    expect(form.get_by_text("--db-ps-mode=disable")).to_be_visible()
