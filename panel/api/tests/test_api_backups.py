"""/v2/databases/{id}/backups and POST /v2/databases with backup_restore, on a real cluster: the
managed service's shapes, the restore queued on the source's node, and the refusals (a time
outside the window, another account's cluster, no scope) with nothing made."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.backups.models import BackupJob, JobKind
from panel.backups.services import backups
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import module_cluster_fixture, refreshed_fixture

pytestmark = pytest.mark.integration


source = module_cluster_fixture("bk-api-tenant", "db-bk-api")


fresh = refreshed_fixture("source")


def create(client: Client, token: str, body: dict) -> object:
    return client.post(
        "/v2/databases", data=json.dumps(body), content_type="application/json", headers=bearer(token)
    )


def test_list_backups_in_the_managed_service_shape(
    fresh: Cluster, api_client: Client, make_token: MakeToken
) -> None:
    owner = User.objects.get(pk=fresh.owner_id)
    token = make_token(owner)
    empty = api_client.get(f"/v2/databases/{fresh.pk}/backups", headers=bearer(token))
    assert empty.status_code == 200 and empty.json() == {"backups": []}
    job = backups.create_backup(fresh, "full")
    body = api_client.get(f"/v2/databases/{fresh.pk}/backups", headers=bearer(token)).json()
    assert len(body["backups"]) == 1 and set(body["backups"][0]) == {"created_at", "size_gigabytes"}
    assert 0 < body["backups"][0]["size_gigabytes"] < 1
    assert job.label
    stranger = User.objects.create_user("bk-api-stranger", "s@example.com", "pw-stranger-1")
    refused = api_client.get(f"/v2/databases/{fresh.pk}/backups", headers=bearer(make_token(stranger)))
    assert refused.status_code == 404


def test_create_with_backup_restore_queues_a_restore(
    fresh: Cluster, api_client: Client, make_token: MakeToken, queued_tasks: object
) -> None:
    owner = User.objects.get(pk=fresh.owner_id)
    if not BackupJob.objects.filter(cluster=fresh, kind=JobKind.BACKUP, status="succeeded").exists():
        backups.create_backup(fresh, "full")
    token = make_token(owner, Scope.READ, Scope.CREATE)
    created_at = api_client.get(f"/v2/databases/{fresh.pk}/backups", headers=bearer(token)).json()["backups"][
        0
    ]["created_at"]
    body = {
        "name": "db-bk-api-restored",
        "engine": "pg",
        "size": fresh.plan_slug,
        "backup_restore": {"database_name": fresh.name, "backup_created_at": created_at},
    }
    response = create(api_client, token, body)
    assert response.status_code == 201, response.content
    new = Cluster.objects.get(owner=owner, name="db-bk-api-restored")
    assert response.json()["database"]["id"] == str(new.pk) and new.status == "creating"
    assert new.restore_origin.source_id == fresh.pk
    job = BackupJob.objects.get(cluster=fresh, kind=JobKind.RESTORE)
    assert queued_tasks(fresh.backups_queue) == [("panel.backups.tasks.restore", [str(job.pk)])]  # type: ignore[operator]
    new.delete()
    job.delete()

    early = {**body, "name": "db-bk-api-early"}
    early["backup_restore"] = {"database_name": fresh.name, "backup_created_at": "2001-01-01T00:00:00Z"}
    refused = create(api_client, token, early)
    assert refused.status_code in (400, 422) and "Choose a time between" in refused.json()["message"]
    unknown = {**body, "name": "db-bk-api-x", "backup_restore": {"database_name": "not-mine"}}
    assert create(api_client, token, unknown).status_code == 404
    read_only = create(api_client, make_token(owner), {**body, "name": "db-bk-api-ro"})
    assert read_only.status_code == 403
    assert not Cluster.objects.filter(name__in=["db-bk-api-early", "db-bk-api-x", "db-bk-api-ro"]).exists()
    assert dt.datetime.fromisoformat(created_at.replace("Z", "+00:00")).tzinfo is not None
