"""Integration: new data directories copied from one initdb (PANEL_PGDATA_TEMPLATE), each with a
superuser password of its own, and a template no cluster can write to."""

from __future__ import annotations

import os
import stat
import subprocess

import psycopg
import pytest
from django.conf import settings

from panel.clusters import services
from panel.clusters.engine import dbconn, isolation, panel_roles, pgdata_template, postgres
from panel.clusters.models import Cluster, credentials
from panel.clusters.models.servers import server_host, server_port
from tests.fixtures.clusters import make_local_cluster

pytestmark = pytest.mark.integration


def superuser_secret(cluster: Cluster) -> str:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = %s", [settings.PANEL_SUPERUSER]
        ).fetchone()
    assert row is not None
    return str(row[0])


def test_copies_of_the_template_keep_secrets_of_their_own(owner, transactional_db):
    assert settings.PANEL_PGDATA_TEMPLATE  # the tests' setting
    first = make_local_cluster(owner, name="db-copy-one")
    second = make_local_cluster(owner, name="db-copy-two")
    try:
        template = pgdata_template.template_dir(first.version, settings.PANEL_SUPERUSER)
        assert (template / pgdata_template.READY).exists()
        # Each copy's superuser logs in with its own password, kept as a SCRAM verifier.
        secrets = [superuser_secret(cluster) for cluster in (first, second)]
        assert secrets[0] != secrets[1]
        assert panel_roles.scram_checks(secrets[0], credentials.superuser_password(first))
        assert not panel_roles.scram_checks(secrets[1], credentials.superuser_password(first))
        # ...and not with the other's.
        params = {
            "host": server_host(second),
            "port": server_port(second),
            "user": settings.PANEL_SUPERUSER,
            "dbname": "postgres",
            "connect_timeout": 5,
        }
        psycopg.connect(**params, password=credentials.superuser_password(second)).close()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(**params, password=credentials.superuser_password(first)).close()
        # The copies belong to their clusters' users; the template to the panel alone.
        for cluster in (first, second):
            assert cluster.pgdata.stat().st_uid == isolation.os_user(cluster).uid
        if os.geteuid() == 0:
            held = template / "pgdata"
            assert held.stat().st_uid == 0
            assert stat.S_IMODE(template.stat().st_mode) == 0o700
            assert all(path.stat().st_uid == 0 for path in held.rglob("*") if not path.is_symlink())
            assert isolation.os_user(first).uid != 0
    finally:
        for cluster in (first, second):
            services.delete_cluster(cluster, confirm_name=cluster.name)


def test_without_the_setting_each_cluster_runs_initdb(owner, transactional_db, settings):
    settings.PANEL_PGDATA_TEMPLATE = False
    cluster = make_local_cluster(owner, name="db-own-initdb")
    try:
        # initdb's own system identifier: not the template's.
        with dbconn.admin_connection(cluster) as conn:
            own = conn.execute("SELECT system_identifier FROM pg_catalog.pg_control_system()").fetchone()
        template = pgdata_template.template_dir(cluster.version, settings.PANEL_SUPERUSER) / "pgdata"
        if template.exists():  # made by an earlier test of this session: not where this one came from
            control = postgres.bindir_for(cluster.version) / "pg_controldata"
            out = subprocess.run([str(control), str(template)], capture_output=True, text=True, check=True)
            assert str(own[0]) not in out.stdout
        assert superuser_secret(cluster).startswith("SCRAM-SHA-256$")
    finally:
        services.delete_cluster(cluster, confirm_name=cluster.name)
