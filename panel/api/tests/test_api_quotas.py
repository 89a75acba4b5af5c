"""Storage quotas through the API, on a real cluster: set (setquota's sizes), list with the
measured usage, bad input answered and nothing changed, scopes and other accounts."""

from __future__ import annotations

import json

from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken, bearer
from panel.api.tests.test_api_databases import assert_error
from panel.clusters.models import Cluster
from panel.quotas.models import Quota


def put(client: Client, url: str, token: str, body: object) -> object:
    return client.put(url, data=json.dumps(body), content_type="application/json", headers=bearer(token))


def test_quotas_through_the_api(
    api_client: Client, local_cluster: Cluster, owner: User, other_user: User, make_token: MakeToken
) -> None:
    token = make_token(owner, Scope.READ, Scope.UPDATE)
    base = f"/v2/databases/{local_cluster.pk}"

    response = put(
        api_client, f"{base}/quotas/database/defaultdb", token, {"space_soft": "1G", "space_hard": "2G"}
    )
    assert response.status_code == 200, response.content
    shown = response.json()["quota"]
    assert shown["space"]["soft"] == 1024**3 and shown["space"]["hard"] == 2 * 1024**3
    assert (
        shown["state"] == "ok" and shown["flags"] == "--" and shown["space"]["used"] > 0
    )  # measured at once

    listed = api_client.get(f"{base}/quotas", headers=bearer(token)).json()
    assert [(q["kind"], q["name"]) for q in listed["quotas"]] == [("database", "defaultdb")]
    assert listed["grace"] == {"space_seconds": 604800, "relations_seconds": 604800}
    assert listed["disk"]["used_bytes"] > 0 and listed["disk"]["full"] is False

    # Bad input: the right status and message, and the quota as it was.
    bad = put(
        api_client, f"{base}/quotas/database/defaultdb", token, {"space_soft": "3G", "space_hard": "2G"}
    )
    assert "above the hard one" in assert_error(bad, 422, "quota.soft_above_hard")["message"]
    bad = put(api_client, f"{base}/quotas/database/defaultdb", token, {"space_hard": "-1"})
    assert "not a size" in assert_error(bad, 422, "quota.bad_size")["message"]
    assert_error(
        put(api_client, f"{base}/quotas/database/nodb", token, {"space_hard": "1G"}),
        404,
        "database.not_found",
    )
    assert_error(put(api_client, f"{base}/quotas/table/x", token, {"space_hard": "1G"}), 404, "not_found")
    assert list(Quota.objects.values_list("name", "space_hard")) == [("defaultdb", 2 * 1024**3)]

    # Scope and another account.
    assert_error(
        put(
            api_client,
            f"{base}/quotas/database/defaultdb",
            make_token(owner, Scope.READ),
            {"space_hard": "5G"},
        ),
        403,
        "forbidden",
    )
    outsider = make_token(other_user, Scope.READ, Scope.UPDATE)
    assert_error(api_client.get(f"{base}/quotas", headers=bearer(outsider)), 404, "not_found")
    assert_error(
        api_client.delete(f"{base}/quotas/database/defaultdb", headers=bearer(outsider)), 404, "not_found"
    )

    # Grace periods, as setquota -t; then the quota goes.
    grace = put(
        api_client, f"{base}/quota_grace", token, {"space_seconds": 864000, "relations_seconds": 864000}
    )
    assert grace.status_code == 204
    assert api_client.get(f"{base}/quotas", headers=bearer(token)).json()["grace"]["space_seconds"] == 864000
    assert api_client.delete(f"{base}/quotas/database/defaultdb", headers=bearer(token)).status_code == 204
    assert not Quota.objects.exists()
