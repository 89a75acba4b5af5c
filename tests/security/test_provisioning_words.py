"""Issue 38: a failed creation shows a coded sentence, never a program's output or a path.

A real step fails for real (the privilege guard's source does not compile, so make and the
compiler print their words, full of paths); the page, the events and the error banner say which
step stopped and what to do, in English and German, and the compiler's words are the log's. A
creation that works still ends online with no banner.
"""

from __future__ import annotations

import shutil

import pytest
from django.conf import settings
from django.urls import reverse

from panel.clusters import services
from panel.clusters.engine import guard, postgres
from panel.clusters.models import ClusterStatus

pytestmark = pytest.mark.integration


def test_a_failing_step_shows_which_step_and_keeps_the_tool_output_in_the_log(
    fresh_lib, monkeypatch, tmp_path, owner, owner_client, transactional_db, caplog
):
    source = tmp_path / "guard"
    shutil.copytree(guard.SOURCE_DIR, source)
    with (source / "pgpanel_guard.c").open("a") as fh:
        fh.write("\nthis is not C;\n")
    monkeypatch.setattr(guard, "SOURCE_DIR", source)
    cluster = services.create_cluster(owner, name="db-nocompile", plan_slug="db-s-1vcpu-1gb", enqueue=False)
    try:
        cluster = services.provision_cluster(cluster.pk)

        assert cluster.status == ClusterStatus.ERROR
        assert postgres.postmaster_pid(cluster.pgdata) is None
        url = reverse("clusters:detail", args=[cluster.pk])
        page = owner_client.get(url).content.decode()
        assert "Creating the cluster stopped at the step “Building the privilege guard”. Retry;" in page
        # The banner and the event (the page's Recent events) say it alike.
        assert page.count("Creating the cluster stopped at the step") == 2
        assert (
            "pgpanel_guard.c" not in page and "make exited" not in page and "Entering directory" not in page
        )
        assert str(tmp_path) not in page and str(fresh_lib) not in page and "/tmp/" not in page
        assert "error:" not in page
        owner_client.cookies[settings.LANGUAGE_COOKIE_NAME] = "de"
        page = owner_client.get(url).content.decode()
        assert "Das Anlegen des Clusters ist beim Schritt „Rechteschutz wird erstellt“ abgebrochen." in page
        assert "pgpanel_guard.c" not in page and "/tmp/" not in page
        # The compiler's words, paths and all, are the administrator's: the server log.
        assert "Building the privilege guard for PostgreSQL 15 failed (make exited with" in caplog.text
        assert "pgpanel_guard.c" in caplog.text
    finally:
        services.delete_cluster(cluster, confirm_name="db-nocompile")


def test_a_creation_that_works_ends_online_with_no_banner(local_cluster, owner_client):
    page = owner_client.get(reverse("clusters:detail", args=[local_cluster.pk])).content.decode()

    assert local_cluster.status == ClusterStatus.ONLINE and local_cluster.error_message == ""
    assert "Online" in page
    assert "Creating the cluster failed" not in page and "stopped at the step" not in page
    assert 'class="alert alert-danger' not in page
