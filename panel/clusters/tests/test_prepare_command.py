"""`manage.py prepare`: make run's four preparation steps in one process, in order; a step that
fails stops it, named (the steps themselves, run for real, in tests/test_run_script.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command

from panel.clusters.management.commands import prepare


def test_the_steps_run_in_order_and_one_that_fails_stops_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []

    def step(name: str, **options: Any) -> None:
        ran.append((name, options))
        if name == "check" and len(ran) > 4:
            raise CommandError("SystemCheckError: the data directory is open to others")

    monkeypatch.setattr(prepare, "call_command", step)
    call_command("prepare", "--url", "http://127.0.0.1:8123/")
    assert ran == [
        ("migrate", {"interactive": False}),
        ("check", {}),
        ("collectstatic", {"interactive": False, "verbosity": 0}),
        ("ensureadmin", {"url": "http://127.0.0.1:8123/"}),
    ]
    with pytest.raises(CommandError, match=r"^manage\.py check failed: SystemCheckError: the data directory"):
        call_command("prepare")
    assert [name for name, _ in ran[4:]] == ["migrate", "check"]  # collectstatic and ensureadmin not run
