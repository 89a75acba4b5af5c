"""`manage.py pool …` against a real cluster and PgBouncer, with the service's validation."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command

from panel.clusters.models import Cluster
from panel.clusters.tests.test_flags_shell import run_pasted
from panel.pools import services

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(shared_local_cluster: Cluster) -> Iterator[Cluster]:
    yield shared_local_cluster
    services.stop_pgbouncer(shared_local_cluster)


def pool(*args: str) -> str:
    out = StringIO()
    call_command("pool", *args, stdout=out)
    return out.getvalue()


def test_the_pool_lifecycle_from_the_command_line(cluster: Cluster) -> None:
    name = cluster.name
    out = pool("create", name, "cli-pool", "--database", "defaultdb", "--mode", "transaction", "--size", "5")
    assert f"Pool cli-pool serves on port {cluster.pooler_port}." in out
    assert "5 of 22 connections allocated to pools." in out

    out = pool("list", name)
    assert "PgBouncer on port" in out and "running" in out
    assert "cli-pool" in out and "(inbound)" in out

    uri = pool("connection", name, "cli-pool").strip()
    assert uri.endswith(f":{cluster.pooler_port}/cli-pool?sslmode=require")
    with psycopg.connect(uri, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("doadmin",)
    flags = pool("connection", name, "cli-pool", "--format", "flags").strip()
    assert "PGSSLMODE=require psql" in flags
    pasted = run_pasted(flags, "SELECT current_user")
    assert (pasted.returncode, pasted.stdout.strip()) == (0, "doadmin"), pasted.stderr
    assert "database = cli-pool" in pool("connection", name, "cli-pool", "--format", "params")

    out = pool("update", name, "cli-pool", "--size", "7", "--user", "doadmin", "--mode", "session")
    assert "Pool cli-pool: defaultdb, doadmin, session, size 7." in out
    out = pool("show", name, "cli-pool")
    assert "Size:" in out and "7" in out and "Clients:" in out
    out = pool("update", name, "cli-pool", "--inbound-user")
    assert "inbound user, session, size 7" in out

    with pytest.raises(CommandError, match="disconnects its 0 connected client"):
        pool("delete", name, "cli-pool")
    assert "Pool cli-pool deleted; 0 client(s) disconnected." in pool("delete", name, "cli-pool", "--yes")
    assert "No pools." in pool("list", name)


def test_the_command_line_refuses_what_the_form_refuses(cluster: Cluster) -> None:
    name = cluster.name
    with pytest.raises(CommandError, match=r"only letters, digits.*\(name\)"):
        pool("create", name, "bad name", "--database", "defaultdb", "--size", "1")
    with pytest.raises(CommandError, match=r"Only 22 of the cluster's 22 .*\(size\)"):
        pool("create", name, "big", "--database", "defaultdb", "--size", "23")
    with pytest.raises(CommandError, match=r"No database named “nope”"):
        pool("create", name, "nodb", "--database", "nope", "--size", "1")
    with pytest.raises(CommandError, match="No cluster named 'missing'"):
        pool("list", "missing")
    with pytest.raises(CommandError, match="No pool named 'ghost'"):
        pool("show", name, "ghost")
    assert not cluster.pools.exists()
