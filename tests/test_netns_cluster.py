"""probe"""
from __future__ import annotations
import pytest
from panel.clusters.models import Node
from tests.fixtures.netns import needs_root
from tests.fixtures.nsnodes import NsNodes

pytestmark = [pytest.mark.integration, needs_root]


def test_nodes(nsnodes: NsNodes) -> None:
    rows = {n.name: n.address for n in Node.objects.all()}
    assert rows == {a.name: a.address for a in nsnodes.agents}
