"""`manage.py managed`: the window, tags and autoscale through the same services as the API; a
refusal is a message naming the argument, nothing changed."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from panel.clusters.tests.conftest import make_cluster_row
from panel.managed.models import Autoscale, Maintenance

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("managed", *args, stdout=out)
    return out.getvalue()


def test_it_sets_and_shows_the_window_tags_and_autoscale(owner: User) -> None:
    make_cluster_row(owner, name="db-cli")
    assert run("window", "db-cli") == "Maintenance window: sunday 03:00 UTC.\n"
    assert run("window", "db-cli", "Wednesday", "4") == "Maintenance window: wednesday 04:00 UTC.\n"
    assert run("tags", "db-cli", "prod", "team:web") == "prod team:web\n"
    assert run("autoscale", "db-cli", "--on", "--threshold", "90") == (
        "Storage autoscale on: past 90%, +10 GiB.\n"
    )


def test_a_refusal_names_the_argument_and_changes_nothing(owner: User) -> None:
    cluster = make_cluster_row(owner, name="db-cli")
    with pytest.raises(CommandError, match=r"Not a day of the week.*\(DAY\)"):
        run("window", "db-cli", "someday", "4")
    with pytest.raises(CommandError, match=r"\(--threshold\)"):
        run("autoscale", "db-cli", "--on", "--threshold", "0")
    with pytest.raises(CommandError, match=r"Not a tag.*\(TAG\)"):
        run("tags", "db-cli", "two words")
    assert not Maintenance.objects.filter(cluster=cluster).exclude(day="sunday").exists()
    assert not Autoscale.objects.filter(cluster=cluster, enabled=True).exists()
    assert not cluster.tags.exists()
