"""A create the node cannot take is a 422 with the refusal's code and its reasons (RAM and the
figures), and nothing is created."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api.models import Scope
from panel.api.tests.conftest import MakeToken
from panel.api.tests.test_api_databases import assert_error
from panel.api.tests.test_api_writes import NEW, post
from panel.clusters.models import Cluster, Node
from panel.clusters.services import nodes


@pytest.mark.django_db
def test_the_api_answers_a_full_node_with_its_code_and_reasons(
    api_client: Client, owner: User, make_token: MakeToken, settings: object
) -> None:
    here = nodes.this_node()
    Node.objects.filter(pk=here.pk).update(ram_bytes=nodes.GB // 2)
    token = make_token(owner, Scope.CREATE, Scope.READ)
    error = assert_error(post(api_client, token, NEW), 422, "node.full")
    assert (
        f"Node “{here.name}” is full for plan db-s-1vcpu-1gb: RAM: the plan needs 1 GB, 0.5 GB"
        in error["message"]
    )
    assert not Cluster.objects.exists()
