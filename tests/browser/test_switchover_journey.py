"""A switchover from the Overview in a real browser (issue 28, test c): a two-member cluster
(Patroni, etcd, HAProxy, PgBouncer) with a writer committing through a transaction pool; the
user picks the standby in the Members card, confirms in the page's modal, sees a disabled button and
a progress line while it runs, and the card and the events list show the new primary without a page
load, while the writer's one connection to PgBouncer goes on and loses nothing. The console stays
clean all along (issue 38, items 5 and 6)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg
import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from panel.clusters import services as cluster_services
from panel.clusters.models import Cluster, MemberRole
from panel.clusters.standbys.services import ha
from panel.pools import services as pool_services
from tests.browser.conftest import log_in, snapshot, wait_for_htmx
from tests.browser.console import ConsoleWatch
from tests.fixtures.ha_pair import HaPair, lend_ha_pair

pytestmark = pytest.mark.integration

HEALTHY_TIMEOUT = 90


@pytest.fixture
def ha_journey_cluster(journey_user: User, ha_pair: HaPair, django_db_blocker: object) -> Iterator[Cluster]:
    """The session's two-member cluster (the cheapest with a standby), the journey user's as
    db-switch, and a transaction pool ``writes`` (deleted after the test, as the loan wants)."""
    with lend_ha_pair(ha_pair, django_db_blocker, journey_user, "db-switch") as cluster:
        pool_services.create_pool(cluster, "writes", "defaultdb", None, "transaction", 3)
        yield cluster


@dataclass
class PoolWriter:
    """One connection through the pool, never reopened: commits sequential ids until stopped and
    keeps every id PgBouncer acknowledged and every error it saw."""

    conn: psycopg.Connection
    acked: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                self.conn.execute("INSERT INTO acked VALUES (%s)", [n])
                self.acked.append(n)
            except psycopg.Error as exc:
                self.errors.append(f"{n}: {exc}")
                time.sleep(0.05)
            time.sleep(0.005)


def _pool_params(cluster: Cluster) -> dict[str, object]:
    details = cluster_services.connection_details(cluster)
    return {
        "host": "127.0.0.1",
        "port": cluster.pooler_port,
        "user": details.user,
        "password": details.password,
        "dbname": "writes",
        "sslmode": "require",
        "connect_timeout": 5,
        "autocommit": True,
        "prepare_threshold": None,
    }


def test_switch_over_from_the_overview_while_a_pool_client_writes(
    live_server, ha_journey_cluster: Cluster, page: Page
) -> None:
    cluster = ha_journey_cluster
    assert ha.wait_healthy(cluster, HEALTHY_TIMEOUT)
    ha.refresh_members(cluster)
    old = cluster.members.get(role=MemberRole.PRIMARY).name
    standby = cluster.members.get(role=MemberRole.STANDBY).name
    params = _pool_params(cluster)
    with psycopg.connect(**params) as setup:  # type: ignore[arg-type]
        setup.execute("DROP TABLE IF EXISTS acked")  # the pair is lent to other modules too
        setup.execute("CREATE TABLE acked (id bigint PRIMARY KEY)")
    conn = psycopg.connect(**params)  # type: ignore[arg-type]
    socket_before = conn.pgconn.socket
    writer = PoolWriter(conn)
    thread = threading.Thread(target=writer.run, daemon=True)
    try:
        watch = ConsoleWatch(page)
        log_in(page, live_server.url, f"/clusters/{cluster.pk}/")
        card = page.locator("#members-card")
        expect(card.locator(f"[data-member='{old}']")).to_have_attribute("data-role", "primary")
        wait_for_htmx(page)
        # Survives only as long as the page is not loaded again.
        page.evaluate("() => { window.switchoverJourney = 'same page'; }")
        thread.start()
        deadline = time.monotonic() + 30
        while len(writer.acked) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(writer.acked) >= 20, writer.errors[:3]

        card.get_by_label("New primary").select_option(standby)
        watch.at("switchover: asked in the page's modal")
        card.get_by_role("button", name="Switchover").click()
        modal = page.locator("#confirm-modal")
        expect(modal).to_contain_text("Switch over now?")
        modal.get_by_role("button", name="Switch over").click()
        # While Patroni switches: the button is disabled and a progress line says what happens.
        progress = page.locator("#switchover-progress")
        expect(progress).to_be_visible()
        expect(progress).to_contain_text("Switching over")
        expect(card.get_by_role("button", name="Switchover")).to_be_disabled()
        expect(page.locator("#members-card .alert[role=status]")).to_contain_text(
            f"{standby} is the primary now.", timeout=90_000
        )
        # The events list follows without a page load (the response's cluster-events-changed).
        expect(page.locator(".event-list")).to_contain_text(
            f"Switchover: {standby} is the primary now (was {old})", timeout=15_000
        )
        expect(page.locator("#switchover-progress")).to_be_hidden()
        card = page.locator("#members-card")
        expect(card.locator(f"[data-member='{standby}']")).to_have_attribute("data-role", "primary")
        expect(card.locator(f"[data-member='{old}']")).to_have_attribute("data-role", "standby")
        assert page.evaluate("() => window.switchoverJourney") == "same page"
        snapshot(page, "switchover-0-done")

        # Writes go on over the same client socket, now on the new primary.
        after = len(writer.acked)
        deadline = time.monotonic() + 30
        while len(writer.acked) < after + 20 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        writer.stop.set()
        thread.join(timeout=10)
    assert writer.errors == [], f"the pool client saw errors: {writer.errors[:3]}"
    assert len(writer.acked) >= after + 20, "writes did not go on after the switchover"
    assert not conn.closed and conn.pgconn.socket == socket_before
    assert conn.execute("SELECT pg_catalog.pg_is_in_recovery()").fetchone() == (False,)
    present = {row[0] for row in conn.execute("SELECT id FROM acked")}
    conn.close()
    lost = [n for n in writer.acked if n not in present]
    assert not lost, f"{len(lost)} acknowledged commits lost: {lost[:10]}"

    # The role change is an event on the Overview, after a page load too.
    watch.at("overview after the switchover")
    page.reload()
    events = page.locator(".event-list")
    expect(events).to_contain_text(f"Switchover: {standby} is the primary now (was {old})")
    watch.at("end")
    assert watch.report() == []
