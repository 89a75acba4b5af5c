"""The managed service's extras driven by its official client, ``pydo`` 0.44, unchanged (set up as
in tests/test_pydo.py): a cluster created with tags, trusted sources and storage and provisioned
by a real Celery worker; its complete cluster object; the tags filter; the maintenance window and
an update installed by a real restart on the worker; the metrics credentials, scraped by a real
Prometheus; storage autoscale moving it (the worker's round) to the next plan's disk with an event and an email.

The "newer minor installed" is simulated through what the node reports: the installed version on
the cluster's maintenance row is set above the running one (as the node's check would record it
after ``apt upgrade``); the restart is real, and the node's check afterwards finds both equal."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import requests
from azure.core.exceptions import HttpResponseError
from django.conf import settings
from django.contrib.auth.models import User

from panel.clusters.models import Cluster, ClusterEvent
from panel.core import taskqueue
from panel.insights.services.collection import collect_cluster
from panel.managed.models import Maintenance
from panel.managed.services import maintenance
from tests.fixtures.pydo import owner_client, wait_online

pytestmark = pytest.mark.django_db(transaction=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _started_at(uri: str) -> object:
    with psycopg.connect(uri, connect_timeout=10) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
        assert row is not None
        return row[0]


def _prometheus_scrapes(cluster_id: str, endpoint: dict[str, object], user: str, password: str) -> float:
    """A real Prometheus scraping the cluster's endpoint with the credentials; the value of its
    ``pgpanel_up`` series for PostgreSQL once it has one."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed (scripts/bootstrap.sh installs it for the tests)"
    port = _free_port()
    with tempfile.TemporaryDirectory() as work:
        config = Path(work) / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: pgpanel\n"
            f"    metrics_path: /metrics/clusters/{cluster_id}\n"
            f"    basic_auth:\n      username: {user}\n      password: {password}\n"
            f"    static_configs:\n      - targets: ['{endpoint['host']}:{endpoint['port']}']\n"
        )
        config.chmod(0o600)
        command = [binary, f"--config.file={config}", f"--storage.tsdb.path={work}/data"]
        command += [f"--web.listen-address=127.0.0.1:{port}"]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                time.sleep(1)
                try:
                    answer = requests.get(
                        f"http://127.0.0.1:{port}/api/v1/query",
                        params={"query": f'pgpanel_up{{cluster_id="{cluster_id}",source="postgres"}}'},
                        timeout=5,
                    ).json()
                except (requests.RequestException, ValueError):
                    continue
                if answer.get("data", {}).get("result"):
                    return float(answer["data"]["result"][0]["value"][1])
            targets = requests.get(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5).json()
            pytest.fail(f"Prometheus never got the cluster's figures: {targets}")
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    raise AssertionError("unreachable")


def test_pydo_drives_the_managed_extras(
    live_server: object, owner: User, celery_worker: None, wait_until: Callable[..., object]
) -> None:
    owner.email = "owner@example.com"
    owner.save()
    client = owner_client(live_server.url, owner)  # type: ignore[attr-defined]

    created = client.databases.create_cluster(
        body={
            "name": "managed-db",
            "engine": "pg",
            "version": "15",
            "size": "db-s-1vcpu-1gb",
            "num_nodes": 1,
            "tags": ["prod", "team:web"],
            "rules": [{"type": "ip_addr", "value": "127.0.0.1"}],
            "storage_size_mib": 10240,
        }
    )["database"]
    uuid = created["id"]
    try:
        got = wait_online(client, uuid)

        # The cluster object, field by field.
        assert "doadmin" in [user["name"] for user in got["users"]]
        assert got["db_names"] == ["defaultdb"]
        assert got["tags"] == ["prod", "team:web"]
        assert [rule["value"] for rule in got["rules"]] == ["127.0.0.1"]
        assert got["storage_size_mib"] == 10240
        assert got["semantic_version"].startswith("15")
        assert got["private_connection"] == got["connection"]
        assert got["standby_connection"] is None
        assert got["version_end_of_life"] == "2027-11-11"
        assert got["maintenance_window"]["pending"] is False
        endpoint = got["metrics_endpoints"][0]
        assert endpoint["port"] == int(live_server.url.rsplit(":", 1)[1])  # type: ignore[attr-defined]
        uri = got["connection"]["uri"]
        with psycopg.connect(uri, connect_timeout=10) as conn:  # the trusted source lets loopback in
            assert conn.execute("SELECT 1").fetchone() == (1,)

        # A replication user (logical only: tests/security/test_guard_replication.py), and back.
        cdc = client.databases.add_user(uuid, {"name": "cdc", "settings": {"pg_allow_replication": True}})
        assert cdc["user"]["settings"] == {"pg_allow_replication": True}
        back = client.databases.update_user(uuid, "cdc", {"settings": {"pg_allow_replication": False}})
        assert back["user"]["settings"] == {"pg_allow_replication": False}

        # Tags filter the list.
        assert [db["id"] for db in client.databases.list_clusters(tag_name="prod")["databases"]] == [uuid]
        assert client.databases.list_clusters(tag_name="staging")["databases"] == []

        # The maintenance window, then an update installed now by a real restart on the worker.
        assert client.databases.update_maintenance_window(uuid, {"day": "tuesday", "hour": "14:00"}) is None
        window = client.databases.get_cluster(uuid)["database"]["maintenance_window"]
        assert (window["day"], window["hour"]) == ("tuesday", "14:00:00")
        cluster = Cluster.objects.get(pk=uuid)
        assert maintenance.check_updates(cluster) == []
        running = Maintenance.objects.get(cluster=cluster).postgres_running
        Maintenance.objects.filter(cluster=cluster).update(postgres_installed=f"{running.split('.')[0]}.999")
        window = client.databases.get_cluster(uuid)["database"]["maintenance_window"]
        assert window["pending"] is True and f"{running} → 15.999" in window["description"][0]
        before = _started_at(uri)
        assert client.databases.install_update(uuid) is None
        wait_until(
            lambda: ClusterEvent.objects.filter(cluster_id=uuid, kind="update-installed").exists(), timeout=90
        )
        assert client.databases.get_cluster(uuid)["database"]["status"] == "online"
        assert _started_at(uri) > before  # type: ignore[operator]
        assert client.databases.get_cluster(uuid)["database"]["maintenance_window"]["pending"] is False

        # Metrics credentials, and a real Prometheus scraping the cluster's endpoint with them.
        generated = client.databases.get_cluster_metrics_credentials()["credentials"]["credentials"]
        assert generated["basic_auth_username"] and len(generated["basic_auth_password"]) >= 12
        body = {"credentials": {"basic_auth_username": "scraper", "basic_auth_password": "s3cret-scrape-pw"}}
        assert client.databases.update_cluster_metrics_credentials(body) is None
        got_credentials = client.databases.get_cluster_metrics_credentials()["credentials"]["credentials"]
        assert got_credentials == body["credentials"]
        collect_cluster(Cluster.objects.get(pk=uuid))
        assert _prometheus_scrapes(uuid, endpoint, "scraper", "s3cret-scrape-pw") == 1.0

        # Autoscale: past the (lowered) threshold, to the next plan with 10 GiB more disk.
        assert client.databases.get_autoscale(uuid)["autoscale"]["storage"]["enabled"] is False
        rule = {"storage": {"enabled": True, "threshold_percent": 1, "increment_gib": 10}}
        assert client.databases.update_autoscale(uuid, rule) is None
        assert client.databases.get_autoscale(uuid)["autoscale"]["storage"] == rule["storage"]
        with psycopg.connect(uri, connect_timeout=10) as conn:
            conn.execute(
                "CREATE TABLE filler AS SELECT repeat(md5(i::text), 30) AS t FROM generate_series(1, 90000) i"
            )
            conn.commit()
        # The node's round, sent to the real worker as beat's fan-out sends it.
        taskqueue.send("panel.managed.tasks.periodic", [], queue=f"node.{settings.PANEL_NODE_NAME}.tasks")
        wait_until(
            lambda: ClusterEvent.objects.filter(cluster_id=uuid, kind="autoscaled").exists(), timeout=90
        )
        moved = client.databases.get_cluster(uuid)["database"]
        assert moved["size"] == "db-s-1vcpu-2gb" and moved["storage_size_mib"] == 25 * 1024
        assert moved["status"] == "online"
        # The email, as the worker's console backend printed it.
        worker_log = Path(settings.PANEL_DATA_DIR) / "celery-worker.log"
        wait_until(
            lambda: "[pgpanel] managed-db: Storage autoscale alert" in worker_log.read_text(), timeout=10
        )
        assert "To: owner@example.com" in worker_log.read_text()

        # Bad input reaches the client as the API's error body with a code (pydo returns a 422's body).
        refused = client.databases.update_autoscale(
            uuid, {"storage": {"enabled": True, "threshold_percent": 150}}
        )
        assert refused["id"] == "unprocessable_entity" and "threshold_percent" in refused["message"]
        assert client.databases.get_autoscale(uuid)["autoscale"]["storage"]["threshold_percent"] == 1
        with pytest.raises(HttpResponseError) as bad_day:  # 204 and 404 only: a 422 raises
            client.databases.update_maintenance_window(uuid, {"day": "someday", "hour": "14:00"})
        assert bad_day.value.response.json()["id"] == "maintenance.day_invalid"
    finally:
        assert client.databases.destroy_cluster(uuid) is None
    wait_until(lambda: not Cluster.objects.filter(pk=uuid).exists(), timeout=60)
