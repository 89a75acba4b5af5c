"""`manage.py firewall …`: list, set (or --clear), add and remove a cluster's trusted sources,
through the same service as the page and the API; refusals are messages with nothing changed."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from panel.clusters.models import Cluster, TrustedSource
from panel.clusters.tests.conftest import make_cluster_row
from tests.fixtures.clusters import module_cluster


def run(*args: str) -> str:
    out = StringIO()
    call_command("firewall", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def values_of(cluster: Cluster) -> list[str]:
    return list(cluster.trusted_sources.order_by("created_at", "value").values_list("value", flat=True))


@pytest.mark.django_db
def test_list_says_open_or_lists_the_sources(owner: User) -> None:
    cluster = make_cluster_row(owner)
    assert "accepts connections from anywhere" in run("list", cluster.name)
    TrustedSource.objects.create(cluster=cluster, value="10.99.0.0/16")
    out = run("list", cluster.name)
    assert out.splitlines()[0].split() == ["SOURCE", "ADDED"]
    assert out.splitlines()[1].startswith("10.99.0.0/16 ")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("set", "db-row", "10.99.0.0/16", "10.0.0.1/8"), "10.0.0.1/8"),
        (("set", "db-row", "example.com"), "example.com"),
        (("set", "db-row"), "--clear"),
        (("set", "db-row", "10.99.0.0/16", "--clear"), "not both"),
        (("add", "db-row", "10.0.0.1/8"), "(VALUE)"),
        (("set", "no-such-cluster", "10.99.0.0/16"), "No cluster named"),
    ],
)
def test_refusals_are_messages_and_change_nothing(owner: User, args: tuple[str, ...], words: str) -> None:
    cluster = make_cluster_row(owner)
    TrustedSource.objects.create(cluster=cluster, value="192.0.2.0/24")
    with pytest.raises(CommandError) as caught:
        run(*args)
    assert words in str(caught.value)
    assert values_of(cluster) == ["192.0.2.0/24"]


@pytest.fixture(scope="module")
def served(django_db_setup: None, django_db_blocker: object) -> Iterator[Cluster]:
    with module_cluster(django_db_blocker, "fw-cli-tenant", "db-fw-cli") as cluster:
        yield cluster


@pytest.mark.django_db
def test_set_add_remove_and_clear_on_a_real_cluster(served: Cluster) -> None:
    name = served.name
    try:
        assert "from 10.99.0.0/16, 203.0.113.7 only" in run("set", name, "10.99.0.0/16", "203.0.113.7/32")
        assert "10.99.0.0/16/" not in (served.pgdata / "pg_hba.conf").read_text()
        assert (
            "hostssl all       all           203.0.113.7/32  scram-sha-256"
            in (served.pgdata / "pg_hba.conf").read_text()
        )
        assert "2001:db8::/32 only" in run("add", name, "2001:DB8::/32")
        assert values_of(served) == ["10.99.0.0/16", "203.0.113.7", "2001:db8::/32"]
        run("remove", name, "10.99.0.0/16")
        assert values_of(served) == ["203.0.113.7", "2001:db8::/32"]
        assert "10.99.0.0/16" not in (served.pgdata / "pg_hba.conf").read_text()
        assert "from anywhere" in run("set", name, "--clear")
        assert values_of(served) == []
        assert (
            "hostssl all       all           all  scram-sha-256"
            in (served.pgdata / "pg_hba.conf").read_text()
        )
        events = [e.kind for e in served.events.order_by("created_at")]
        assert events.count("trusted-sources") == 4
    finally:
        if values_of(served):
            run("set", name, "--clear")
