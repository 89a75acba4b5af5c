"""The cluster's Settings tab: what the cluster is (plan, version, node) and the changes a user
makes to it after creation, each section a form that calls one service function."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from panel.clusters.forms import DeleteClusterForm, TrustedSourceForm
from panel.clusters.lib import firewall
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import firewall as firewall_services
from panel.core.errors import ServiceError
from panel.core.web import add_service_error

# Where the panel's own benchmarks connect from (benchmarks.services.targets): a firewall without
# it stops them, which the section says.
PANEL_CLIENT_ADDRESS = "127.0.0.1"


def render_settings_tab(request: HttpRequest, cluster: Cluster, **extra: Any) -> HttpResponse:
    """The Settings tab: the whole page, or one section for an HTMX swap (``section`` names the
    partial of ``clusters/settings.html`` to render)."""
    section = extra.pop("section", None)
    sources = cluster.trusted_source_values()
    context = {
        "cluster": cluster,
        "active_tab": "settings",
        "plan": cluster.plan,
        "delete_form": DeleteClusterForm(),
        "trusted_sources": sources,
        "source_form": TrustedSourceForm(),
        "benchmarks_shut_out": cluster.is_local and not firewall.allows(sources, PANEL_CLIENT_ADDRESS),
        "panel_client_address": PANEL_CLIENT_ADDRESS,
        **extra,
    }
    template = f"clusters/settings.html#{section}" if request.htmx and section else "clusters/settings.html"
    return render(request, template, context)


@require_GET
def cluster_settings(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return render_settings_tab(request, cluster)


@require_POST
def trusted_source_add(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = TrustedSourceForm(request.POST)
    if form.is_valid():
        try:
            sources = firewall_services.add_trusted_source(cluster, form.cleaned_data["source"])
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            return render_settings_tab(
                request,
                cluster,
                section="trusted-sources",
                source_notice=_("Trusted source “%(source)s” added.") % {"source": sources[-1]},
            )
    return render_settings_tab(request, cluster, section="trusted-sources", source_form=form)


@require_POST
def trusted_source_remove(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    source = request.POST.get("source", "")
    try:
        firewall_services.remove_trusted_source(cluster, source)
    except ServiceError as exc:
        return render_settings_tab(request, cluster, section="trusted-sources", source_error=exc.message)
    return render_settings_tab(
        request,
        cluster,
        section="trusted-sources",
        source_notice=_("Trusted source “%(source)s” removed.") % {"source": source},
    )
