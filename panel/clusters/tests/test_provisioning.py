"""Integration: a real cluster provisioned by the service, reached as a client would."""

from __future__ import annotations

import psycopg
import pytest

from panel.clusters import services
from panel.clusters.engine import postgres

pytestmark = pytest.mark.integration


def test_it_provisions_a_cluster_reachable_with_verify_full(local_cluster, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text(local_cluster.ca_certificate)
    uri = services.connection_details(local_cluster).uri()
    with psycopg.connect(uri.replace("sslmode=require", f"sslmode=verify-full&sslrootcert={ca}")) as conn:
        user, ssl = conn.execute(
            "SELECT current_user, ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
        ).fetchone()
        assert (user, ssl) == ("doadmin", True)
        super_, createdb = conn.execute(
            "SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert (super_, createdb) == (False, True)
        assert conn.execute("SHOW max_connections").fetchone()[0] == "25"
    assert postgres.postmaster_pid(local_cluster.pgdata) is not None
