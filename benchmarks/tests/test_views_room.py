"""Issue 38: a launch that does not fit the server's free connections beside the pools is refused
beside the client count, in the page's language, with the figures (the counting itself runs
against a real server in test_integration_room)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import reverse

from benchmarks.models import BenchmarkRun
from benchmarks.services import room
from benchmarks.tests.test_views_forms import HTMX, RUN, _launch, field_errors
from panel.pools.services import ServerRoom


@pytest.fixture
def full(monkeypatch: pytest.MonkeyPatch) -> None:
    """97 slots, 95 in use, 60 of them the pools' servers."""
    found = ServerRoom(limit=97, backends=95, held_by_pool={"app": 40, "jobs": 20})
    monkeypatch.setattr(room.pools_services, "server_room", lambda cluster: found)


def test_a_launch_beyond_the_free_connections_is_refused_beside_the_client_count(
    owner_client, cluster_row, full
):
    page = _launch(owner_client, cluster_row, clients="8").content.decode()
    errors = field_errors(page, "clients")
    assert errors == [
        "Only 2 of the server&#x27;s 97 connections are free, and this run needs 8. The connection pools "
        "hold 60 of the connections in use; choose at most 2 clients, or lower a pool&#x27;s size."
    ], page
    assert not BenchmarkRun.objects.exists()


def test_the_refusal_is_german_on_a_german_page(owner_client, cluster_row, full):
    url = reverse("benchmarks:run-launch", args=[cluster_row.pk])
    data = {**RUN, "clients": "8"}
    page = owner_client.post(url, data, headers={**HTMX, "accept-language": "de"}).content.decode()
    errors = field_errors(page, "clients")
    assert len(errors) == 1 and errors[0].startswith("Nur 2 der 97 Verbindungen des Servers sind frei"), page
    assert "Die Verbindungspools halten 60" in errors[0] and "höchstens 2 Clients" in errors[0]


def pool_target(name: str, size: int) -> SimpleNamespace:
    return SimpleNamespace(pool=SimpleNamespace(name=name, size=size))


def test_a_pool_run_needs_only_the_servers_its_pool_may_still_open() -> None:
    state = ServerRoom(limit=22, backends=20, held_by_pool={"app": 5, "other": 10})
    # Pool of 10 holding 5: at most 5 more servers, 2 are free.
    found = room.shortage(state, pool_target("app", 10), 30)  # type: ignore[arg-type]
    assert found == room.RoomShortage(needed=5, free=2, limit=22, held=15, fit=7)
    # Clients within what the pool already holds need no new slot.
    assert room.shortage(state, pool_target("app", 10), 5) is None  # type: ignore[arg-type]
    assert room.shortage(state, pool_target("app", 6), 30) is None  # type: ignore[arg-type]
    # Direct: one slot per client.
    assert room.shortage(state, SimpleNamespace(pool=None), 2) is None  # type: ignore[arg-type]
    assert room.shortage(state, SimpleNamespace(pool=None), 3).fit == 2  # type: ignore[arg-type, union-attr]


def test_with_no_slot_free_it_says_what_the_pools_hold_and_when_they_let_go() -> None:
    found = room.RoomShortage(needed=4, free=0, limit=22, held=22, fit=0)
    message = str(room.shortage_error(found).message)
    assert message.startswith("None of the server's 22 connections is free, and this run needs 4;")
    assert "the connection pools hold 22 of them" in message and "after 60 s idle" in message
    alone = str(room.shortage_error(room.RoomShortage(needed=4, free=0, limit=22, held=0, fit=0)).message)
    assert "other clients have disconnected" in alone and "pool" not in alone
