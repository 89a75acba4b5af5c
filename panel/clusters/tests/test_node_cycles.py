"""Each node's last reconciler round and metrics collection: recorded with its duration when the
round ends, shown on the Nodes page with when it ran (UTC), a round longer than its period
flagged there (in English and German)."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from panel.clusters.models import CycleKind, Node, NodeCycle
from panel.clusters.services import cycles, nodes, reconciler
from panel.insights import services as insights

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(staff_user: User) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def cycle_cell(page: str, kind: str) -> str:
    start = page.index(f'data-cycle="{kind}"')
    return page[start : page.index("</dd>", start)]


def test_a_reconciler_round_and_a_collection_record_their_duration(staff: Client) -> None:
    here = nodes.this_node()
    NodeCycle.objects.all().delete()
    page = staff.get("/clusters/nodes/").content.decode()
    assert "not run yet" in cycle_cell(page, "reconcile") and "not run yet" in cycle_cell(page, "collect")
    before = timezone.now()
    reconciler.reconcile()
    insights.collect_all()
    rounds = {c.kind: c for c in NodeCycle.objects.filter(node=here)}
    assert set(rounds) == {CycleKind.RECONCILE, CycleKind.COLLECT}
    for cycle in rounds.values():
        assert before <= cycle.started_at <= timezone.now() and 0 <= cycle.seconds < 60
    page = staff.get("/clusters/nodes/").content.decode()
    shown = cycle_cell(page, "reconcile")
    assert f"{rounds['reconcile'].seconds:.2f} s" in shown
    assert f"{rounds['reconcile'].started_at:%Y-%m-%d %H:%M:%S} UTC" in shown
    assert "Reconciler round" in page and "Metrics collection" in page and "node-cycle-slow" not in page
    # The next round replaces the last one's figures.
    reconciler.reconcile()
    assert NodeCycle.objects.filter(node=here, kind=CycleKind.RECONCILE).count() == 1


def test_a_round_longer_than_its_period_is_flagged(staff: Client, settings: object) -> None:
    settings.PANEL_RECONCILE_SECONDS = 15  # type: ignore[attr-defined]
    settings.PANEL_METRICS_INTERVAL = 15  # type: ignore[attr-defined]
    here = nodes.this_node()
    started = timezone.now() - dt.timedelta(seconds=30)
    cycles.record(CycleKind.RECONCILE, started, 21.5)
    cycles.record(CycleKind.COLLECT, started, 4.25)
    page = staff.get("/clusters/nodes/").content.decode()
    slow = cycle_cell(page, "reconcile")
    assert "21.50 s" in slow and "longer than its 15 s period" in slow and "text-danger" in slow
    assert "node-cycle-slow" not in cycle_cell(page, "collect") and "4.25 s" in cycle_cell(page, "collect")
    german = staff.get("/clusters/nodes/", headers={"accept-language": "de"}).content.decode()
    assert "21,50 s" in cycle_cell(german, "reconcile")
    assert "länger als sein Intervall von 15 s" in cycle_cell(german, "reconcile")
    assert f"{started:%d.%m.%Y %H:%M:%S} UTC" in cycle_cell(german, "reconcile")
    assert "Abgleichsrunde" in german
    # The command line says it too.
    out = StringIO()
    call_command("node", "list", stdout=out)
    assert "RECONCILE" in out.getvalue() and "21.50s(SLOW)" in out.getvalue() and "4.25s" in out.getvalue()
    # A round on a process of no node records nothing.
    Node.objects.filter(pk=here.pk).update(name="elsewhere")
    cycles.record(CycleKind.RECONCILE, started, 1.0)
    assert NodeCycle.objects.get(kind=CycleKind.RECONCILE).seconds == 21.5
