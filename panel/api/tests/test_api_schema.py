"""The API against its own OpenAPI schema, property-based (schemathesis): every operation that
``/v2/openapi.json`` lists, called on a live server with a token (every scope) of a user who owns
one real cluster. Each answer must be no 5xx, a documented status code with a body matching its
documented schema, and a request without the token must get a 401. A cluster uuid that does not
exist is a 404 in the error shape; half of the well-formed calls name the real cluster instead.

The operations come from the schema, not from a list: endpoints added later are walked too.
Destroying "the cluster" (``DELETE /v2/databases/{database_id}``) is pointed at a second cluster,
a row with no PostgreSQL behind it, so the real one stays for every other operation; deletions
run last. Work the API queues (provisioning, teardown) goes to a Redis no worker reads.
"""

from __future__ import annotations

import os
import traceback
from typing import Any

import hypothesis
import pytest
import schemathesis
from django.contrib.auth.models import User
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken
from panel.clusters.models import Cluster
from panel.clusters.tests.conftest import make_cluster_row

pytestmark = [pytest.mark.integration, pytest.mark.schema]

# Per operation and per mode (well-formed, malformed); PANEL_SCHEMA_EXAMPLES=200 explores more.
MAX_EXAMPLES = int(os.environ.get("PANEL_SCHEMA_EXAMPLES", "8"))
CLUSTER_PARAMETER = "database_id"
DESTROY_CLUSTER = "DELETE /v2/databases/{database_id}"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    ignored_auth,
]


def _settings() -> hypothesis.settings:
    # Derandomized: the same calls in every run, so a failure in CI is one to reproduce, not luck.
    return hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


def _order(operation: APIOperation) -> tuple[int, str]:
    return (1 if operation.method.upper() == "DELETE" else 0, operation.label)


def _exercise(
    operation: APIOperation,
    mode: GenerationMode,
    base_url: str,
    token: str,
    real_cluster: str,
    seen: dict[str, set[int]],
) -> str | None:
    """Call ``operation`` with generated requests; the first failure found, or None."""
    headers = {"Authorization": f"Bearer {token}"}
    checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS
    names_cluster = any(p.name == CLUSTER_PARAMETER for p in operation.path_parameters)

    @_settings()
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode), real=st.booleans())
    def run(case: Case, real: bool) -> None:
        if names_cluster and mode is GenerationMode.POSITIVE and real:
            case.path_parameters[CLUSTER_PARAMETER] = real_cluster
        response = case.call_and_validate(base_url=base_url, headers=headers, checks=checks)
        seen.setdefault(operation.label, set()).add(response.status_code)
        unknown = names_cluster and mode is GenerationMode.POSITIVE and not real
        if unknown and response.status_code not in (401, 403, 429):
            # A cluster that does not exist (a random uuid): nothing is looked at before that.
            body: Any = response.json()
            assert response.status_code == 404 and body["id"] == "not_found", (
                f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
            )

    try:
        run()
    except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; failures listed together
        return f"{operation.label} ({mode.value}): {_describe(exc)}"
    return None


def _describe(exc: BaseException) -> str:
    # Schemathesis' group says what failed and how to reproduce it (a curl line).
    return "".join(traceback.format_exception_only(exc)).strip()


def test_every_operation_answers_as_its_schema_says(
    live_server: Any, owner: User, local_cluster: Cluster, make_token: MakeToken, queued_tasks: Any
) -> None:
    victim = make_cluster_row(owner, name="db-victim", port=None, pooler_port=None)
    token = make_token(owner, *Scope.values)
    schema = schemathesis.openapi.from_url(f"{live_server.url}/v2/openapi.json")
    operations = sorted((result.ok() for result in schema.get_all_operations()), key=_order)
    labels = {operation.label for operation in operations}
    assert {"GET /v2/databases", "GET /v2/databases/{database_id}", DESTROY_CLUSTER} <= labels

    failures = []
    seen: dict[str, set[int]] = {}  # the statuses each operation answered
    for operation in operations:
        target = victim if operation.label == DESTROY_CLUSTER else local_cluster
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failure = _exercise(operation, mode, live_server.url, token, str(target.pk), seen)
            if failure:
                failures.append(failure)
    assert not failures, "\n\n".join(failures)

    # The calls reached the endpoints, not only their refusals: every operation was called, the
    # real cluster was read, unknown ones were 404s and malformed input was refused.
    assert set(seen) == labels
    assert {200, 404, 422} <= seen["GET /v2/databases/{database_id}"] | seen["GET /v2/databases"]
    assert 200 in seen["GET /v2/databases/{database_id}"]

    # The real cluster served every call and is still there; the destroy calls reached the other.
    local_cluster.refresh_from_db()
    assert local_cluster.status == "online"
    victim.refresh_from_db()
    assert victim.status == "deleting"
