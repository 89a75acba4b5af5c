"""A replica's heal that fails is tried again by the reconciler, with a back-off, until it works:
each failed attempt is an event with its reason (on the replica's page as its error), the replica
stays ``error`` meanwhile, and the one email, "Replica re-synced", comes when it streams again.
The failure is real: the source is stopped while the heal copies it again, then started."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import psycopg
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from panel.clusters.models import Cluster, ClusterStatus
from panel.clusters.replicas.services import replica_heal, replicas
from panel.clusters.services import lifecycle
from panel.clusters.tests.conftest import client_params, connect_as_client, module_cluster_fixture
from panel.core.errors import shown_text

pytestmark = pytest.mark.integration


source = module_cluster_fixture("heal-owner", "heal-src")


def fresh(cluster: Cluster) -> Cluster:
    return Cluster.objects.select_related("node", "replica_of").get(pk=cluster.pk)


def _rows(replica: Cluster, ca_file: str) -> set[int] | None:
    """The rows of ``healed`` on the replica, over TLS verified against the CA it had before."""
    params = client_params(replica, sslmode="verify-ca", sslrootcert=ca_file, connect_timeout=3)
    try:
        with psycopg.connect(**params) as conn:  # type: ignore[arg-type]
            return {row[0] for row in conn.execute("SELECT id FROM healed").fetchall()}
    except psycopg.Error:
        return None


def test_retry_after_doubles_up_to_its_cap() -> None:
    waits = [replica_heal.retry_after(n) for n in range(1, 12)]
    assert waits[:3] == [replica_heal.RETRY_FIRST, 2 * replica_heal.RETRY_FIRST, 4 * replica_heal.RETRY_FIRST]
    assert waits == sorted(waits) and waits[-1] == replica_heal.RETRY_MAX


def test_a_failed_heal_is_retried_until_the_source_is_back(
    source: Cluster,
    db: None,
    mailoutbox: list[object],
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Callable[..., object],
    tmp_path: object,
) -> None:
    source = fresh(source)
    with connect_as_client(source) as conn:
        conn.execute("CREATE TABLE healed (id int PRIMARY KEY)")
        conn.execute("INSERT INTO healed VALUES (1)")
    replica = replicas.add_replica(source, name="heal-src-ro")
    ca_file = f"{tmp_path}/replica-ca.crt"
    with open(ca_file, "w") as out:
        out.write(replica.ca_certificate)
    before = (replica.port, replica.ca_certificate, replica.users.get(name="doadmin").password)
    assert _rows(replica, ca_file) == {1}

    # The source stopped: the heal cannot copy it (a one-member source has no pg_rewind), fails.
    lifecycle.perform_action(source, "stop")
    note = replica_heal.heal(fresh(replica), "the test's divergence")
    assert "failed (attempt 1)" in note
    failed = fresh(replica)
    assert failed.status == ClusterStatus.ERROR
    shown = shown_text(failed.error_message)
    assert "attempt 1" in shown and "Next attempt in 5 s" in shown
    (event,) = failed.events.filter(kind="replica-heal-failed")
    assert str(event.shown) == shown and event.level == "error"
    assert str(source.data_root) not in shown  # the engine's words (paths) are the log's
    assert failed.events.filter(kind="replica-diverged").count() == 1
    web = Client()
    web.force_login(failed.owner)
    page = web.get(reverse("clusters:detail", args=[failed.pk])).content.decode()
    assert "Re-synchronising the replica failed (attempt 1)" in page  # the reason, on its page
    pending = replica_heal.heal_pending(failed)
    assert pending is not None and pending.failed == 1 and "the test's divergence" in pending.reason
    assert pending.due == event.created_at + dt.timedelta(seconds=replica_heal.RETRY_FIRST)

    # While its source is stopped the reconciler does not spend attempts on it.
    monkeypatch.setattr(replica_heal, "RETRY_FIRST", 0.0)
    assert replica_heal.heal_diverged() == []
    assert fresh(replica).events.filter(kind="replica-heal-failed").count() == 1

    # The source back, with a row written meanwhile: before the back-off is over nothing is tried…
    lifecycle.perform_action(fresh(source), "start")
    with connect_as_client(source) as conn:
        conn.execute("INSERT INTO healed VALUES (2)")
    monkeypatch.setattr(replica_heal, "RETRY_FIRST", 3600.0)
    assert replica_heal.heal_diverged() == []
    assert fresh(replica).status == ClusterStatus.ERROR

    # … then the reconciler's pass tries again, and it heals.
    monkeypatch.setattr(replica_heal, "RETRY_FIRST", 0.0)
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        notes = replica_heal.heal_diverged()
    assert len(notes) == 1 and "re-synchronised with pg_basebackup" in notes[0] and "attempt 2" in notes[0]
    healed = fresh(replica)
    assert healed.status == ClusterStatus.ONLINE and healed.error_message == ""
    assert (healed.port, healed.ca_certificate, healed.users.get(name="doadmin").password) == before
    assert _rows(healed, ca_file) == {1, 2}
    with connect_as_client(healed) as conn, pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        conn.execute("INSERT INTO healed VALUES (3)")
    (resynced,) = healed.events.filter(kind="replica-resynced")
    assert "attempt 2" in resynced.message and "pg_basebackup" in resynced.message
    assert replica_heal.heal_pending(healed) is None
    # One email, of its own kind.
    (email,) = mailoutbox
    assert "Replica re-synced" in email.subject and healed.name in email.subject  # type: ignore[attr-defined]
    assert "Primary changed" not in email.subject  # type: ignore[attr-defined]

    # Healthy again: the next pass leaves it alone.
    assert replica_heal.heal_diverged() == []
    assert timezone.now() >= resynced.created_at
    replicas.delete_replica(fresh(replica), foreground=True)
