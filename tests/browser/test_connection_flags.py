"""Issue 11, item 8, in Chromium: the "Flags" view of a Connection details box, password shown,
pasted into a shell, connects with TLS, to the cluster and through a pool.

The old line (``psql … --set=sslmode=require``) connected too, but only because libpq's default
``prefer`` met a server that offers TLS: test_flags_shell shows it sending the password in clear to
a server that does not, which the line shown now refuses.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from panel.clusters.models import Cluster
from panel.clusters.tests.test_flags_shell import SSL_QUERY, run_pasted
from panel.pools import services as pool_services
from tests.browser.conftest import log_in, wait_for_htmx

pytestmark = pytest.mark.integration


def _shown_flags(page: Page, password: str) -> str:
    """Switch the box to Flags, show the password, and read the line as the page shows it."""
    box = page.locator("#connection-details")
    wait_for_htmx(page)
    page.locator("#conn-view").select_option("flags")
    wait_for_htmx(page)
    box.get_by_role("button", name="show password").click()
    code = box.locator("pre.conn-string code")
    expect(code).to_contain_text(password)
    line = code.inner_text().strip()
    assert "PGSSLMODE=require psql" in line and "--set" not in line
    return line


def test_the_flags_line_pasted_into_a_shell_connects_with_tls(
    live_server, journey_cluster: Cluster, page: Page
) -> None:
    cluster = journey_cluster
    password = cluster.users.get(name="doadmin").password
    log_in(page, live_server.url, f"/clusters/{cluster.pk}/")
    line = _shown_flags(page, password)

    pasted = run_pasted(line, SSL_QUERY)
    assert (pasted.returncode, pasted.stdout.strip()) == (0, "t"), pasted.stderr
    # The cluster refuses a client without TLS anyway (pg_hba is hostssl only).
    plain = run_pasted(line.replace("PGSSLMODE=require", "PGSSLMODE=disable"), "SELECT 1")
    assert plain.returncode != 0 and "no encryption" in plain.stderr, plain.stderr

    # Through a pool: PgBouncer has no pg_stat_ssl for its clients' side, so the proof is that the
    # line connects while it insists on TLS, and that PgBouncer refuses the same line without it.
    pool = pool_services.create_pool(cluster, "flags-pool", "defaultdb", None, "transaction", 5)
    page.goto(f"{live_server.url}/clusters/{cluster.pk}/pools/{pool.pk}/")
    line = _shown_flags(page, password)
    assert f"-p {cluster.pooler_port} -d flags-pool" in line
    pasted = run_pasted(line, "SELECT current_database()")
    assert (pasted.returncode, pasted.stdout.strip()) == (0, "defaultdb"), pasted.stderr
    plain = run_pasted(line.replace("PGSSLMODE=require", "PGSSLMODE=disable"), "SELECT 1")
    assert plain.returncode != 0, plain.stdout
