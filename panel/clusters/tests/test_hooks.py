"""The steps apps register to run before a cluster is torn down."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from panel.clusters import hooks


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    registered: list[object] = []
    monkeypatch.setattr(hooks, "_before_teardown", registered)
    return registered


def test_every_step_runs_in_order_once_and_a_failing_one_does_not_stop_the_rest(steps, caplog):
    seen: list[str] = []

    def first(cluster: SimpleNamespace) -> None:
        seen.append(f"first {cluster.pk}")

    def broken(cluster: SimpleNamespace) -> None:
        raise RuntimeError("no broker")

    def last(cluster: SimpleNamespace) -> None:
        seen.append(f"last {cluster.pk}")

    for step in (first, broken, last, first):
        hooks.register_before_teardown(step)
    with caplog.at_level(logging.ERROR, logger="panel.clusters.hooks"):
        hooks.before_teardown(SimpleNamespace(pk="db-1"))  # type: ignore[arg-type]
    assert seen == ["first db-1", "last db-1"]
    assert "broken failed" in caplog.text and "no broker" in caplog.text
