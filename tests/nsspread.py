"""The cluster of tests/test_netns_cluster.py's journey: three members its owner requested at the
real web of the namespace nodes' panel (tests/fixtures/nsnodes.py, tests/fixtures/nsweb.py:
gunicorn over HTTP), online, with the owner's session at that web and how long it took. The
module's fixture makes it once; its three tests go on from it."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from django.contrib.auth.models import User

from panel.clusters.models import Cluster, ClusterStatus
from panel.core.polling import wait_for
from tests.fixtures.nsnodes import NsNodes
from tests.websession import WebSession

ONLINE_TIMEOUT = 240.0
PASSWORD = "nsowner-password-1"
# A switchover's answer comes once Patroni has done it (or refused): no tight bound on a busy machine.
SWITCHOVER_TIMEOUT = 180.0


@dataclass
class Spread:
    """The journey's cluster, its owner's session at the real web, and how long it took to come
    online."""

    cluster: Cluster
    session: WebSession
    online_after: float


def request_spread(nsnodes: NsNodes) -> Spread:
    """A three-member cluster its owner requested at the real web (gunicorn, over HTTP), online."""
    started = time.monotonic()
    owner = User.objects.create_user("nsowner", "nsowner@example.com", PASSWORD)
    assert nsnodes.web is not None
    session = WebSession(nsnodes.web.url, timeout=SWITCHOVER_TIMEOUT)
    session.login(owner.username, PASSWORD)
    form = session.get("/clusters/new/")
    version = re.search(r'<select name="version"[^>]*>\s*<option value="([^"]+)"', form)
    assert version, form[-3000:]  # the versions the agents reported
    wanted = {"name": "spread", "version": version.group(1), "plan": "db-s-1vcpu-2gb", "num_nodes": "3"}
    answer = session.post("/clusters/new/", {**wanted, "node": ""}, referer="/clusters/new/")
    assert not session.url.endswith("/clusters/new/"), answer[-3000:]  # the form's errors
    cluster = Cluster.objects.get(owner=owner, name="spread")
    assert session.url.endswith(f"/clusters/{cluster.pk}/"), session.url  # its page, once requested

    def settled() -> bool:
        cluster.refresh_from_db()
        return cluster.status != ClusterStatus.CREATING

    assert wait_for(settled, ONLINE_TIMEOUT, interval=0.5), f"the cluster not online\n{nsnodes.logs()}"
    assert cluster.status == ClusterStatus.ONLINE, f"{cluster.error_message}\n{nsnodes.logs()}"
    return Spread(cluster, session, time.monotonic() - started)
