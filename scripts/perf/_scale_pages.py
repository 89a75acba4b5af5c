"""The pages ``scale.py`` times (imported after ``django.setup()``): one set of requests, made
twice in one run, when the panel holds only its first cluster (the empty panel) and again with all
of them, and reported side by side with the ratio of the two."""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

# Every tab of one cluster, by URL name (each takes the cluster's id).
TABS = [
    "clusters:detail", "pools:list", "benchmarks:tab", "insights:tab", "insights:queries",
    "logs:tab", "quotas:tab", "clusters:users", "backups:tab", "migrate:tab", "clusters:settings",
]  # fmt: skip


@dataclass
class Timings:
    """One pass over the pages: each page's median server time (ms), in the order requested, and
    every timed request's (``samples``, warm-ups left out) for the percentiles."""

    clusters: int
    medians: dict[str, float] = field(default_factory=dict)
    tab_samples: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)

    @property
    def tabs_p95(self) -> float:
        return statistics.quantiles(self.tab_samples, n=20)[-1]

    @property
    def web_p95(self) -> float:
        """The p95 of every request of the pass: what the issue's "web p95" compares."""
        return statistics.quantiles(self.samples, n=20)[-1]


class PageTimer:
    """The owner's and an operator's logged-in test Clients and a read token, made once (Django's
    test environment can be set up once per process) and used for every pass."""

    def __init__(self, owner: Any, operator: Any, rounds: int) -> None:
        from django.test import Client
        from django.test.utils import setup_test_environment

        from panel.api.models import Scope
        from panel.api.services import create_token

        setup_test_environment()  # the test Client's host "testserver" allowed, mail kept in memory
        logging.getLogger("axes").setLevel(logging.WARNING)
        self.rounds = rounds
        self.user, self.staff = Client(), Client()
        self.user.force_login(owner)
        self.staff.force_login(operator)
        self.token = create_token(owner, "scale", [Scope.READ])[1]

    def _times(self, client: Any, url: str, **extra: Any) -> list[float]:
        times = []
        for index in range(self.rounds + 2):
            started = time.perf_counter()
            response = client.get(url, **extra)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"GET {url}: {response.status_code}")
            if index >= 2:  # the first two warm caches and templates
                times.append(elapsed)
        return times

    def measure(self, cluster: Any, clusters: int) -> Timings:
        """The cluster list, the Nodes page, ``GET /v2/databases``, every tab of ``cluster`` and its
        Insights data, each ``rounds`` times after two warm-ups; ``clusters``: how many the panel
        holds now (for the report)."""
        from django.urls import reverse

        result = Timings(clusters)

        def timed(name: str, client: Any, url: str, **extra: Any) -> list[float]:
            times = self._times(client, url, **extra)
            result.medians[name] = statistics.median(times)
            result.samples.extend(times)
            return times

        timed("list", self.user, reverse("clusters:list"))
        timed("nodes", self.staff, reverse("clusters:nodes"))
        timed("api list", self.user, "/v2/databases", headers={"Authorization": f"Bearer {self.token}"})
        kwargs = {"cluster_id": cluster.pk}
        for name in TABS:
            result.tab_samples += timed(f"tab {name}", self.user, reverse(name, kwargs=kwargs))
        timed("insights data", self.user, reverse("insights:data", kwargs=kwargs) + "?range=1h")
        return result


def report(empty: Timings, full: Timings) -> list[str]:
    """Each page's median with one cluster and with all, and their ratio; then the p95s."""

    def row(name: str, before: float, after: float) -> str:
        return f"page {name}: {before:.1f} ms empty, {after:.1f} ms full ({after / before:.2f}×)"

    lines = [f"pages, median server time: empty = {empty.clusters} cluster, full = {full.clusters} clusters"]
    lines += [row(name, empty.medians[name], full.medians[name]) for name in full.medians]
    lines.append(row("tabs p95", empty.tabs_p95, full.tabs_p95))
    lines.append(
        f"web p95 (all {len(full.samples)} requests above): {empty.web_p95:.1f} ms empty, "
        f"{full.web_p95:.1f} ms full: {ratio(empty, full):.2f}× empty (goal ≤ 1.50×)"
    )
    return lines


def ratio(empty: Timings, full: Timings) -> float:
    return full.web_p95 / empty.web_p95
