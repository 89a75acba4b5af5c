"""The cluster's Settings tab: what the cluster is (plan, version, node) and the changes a user
makes to it after creation, each section a form that calls one service function: Resize
(``services.resize``), Configuration (``services.config``) here, trusted sources in
``firewall_views``."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods

from panel.clusters.forms import ConfigForm, DeleteClusterForm, ResizeForm, TrustedSourceForm
from panel.clusters.lib import firewall
from panel.clusters.models import Cluster
from panel.clusters.models.firewall import trusted_source_values
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import config, resize
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, add_service_error, go_to
from panel.lockout import client_address

# Where the panel's own benchmarks connect from (benchmarks.services.targets): a firewall without
# it stops them, which the section says.
PANEL_CLIENT_ADDRESS = "127.0.0.1"


def render_settings_tab(request: PanelRequest, cluster: Cluster, **extra: Any) -> HttpResponse:
    """The Settings tab: the whole page, or one section for an HTMX swap (``section`` names the
    partial of ``clusters/settings.html`` to render)."""
    section = extra.pop("section", None)
    sources = trusted_source_values(cluster)
    context = {
        "cluster": cluster,
        "active_tab": "settings",
        "plan": cluster.plan,
        "delete_form": DeleteClusterForm(),
        "trusted_sources": sources,
        "source_form": TrustedSourceForm(),
        "benchmarks_shut_out": cluster.is_local and not firewall.allows(sources, PANEL_CLIENT_ADDRESS),
        "panel_client_address": PANEL_CLIENT_ADDRESS,
        "my_address": _my_address(request, sources),
        "resize_form": ResizeForm(),
        "nodes_form": ResizeForm(initial={"num_nodes": cluster.num_nodes}),
        # Called by the template, so only when the Resize card is rendered (it reads the node's
        # room, the data size and the pools).
        "plan_choices": partial(resize.plan_choices, cluster) if cluster.is_local else [],
        "config_form": ConfigForm(current=config.current_config(cluster)),
        **extra,
    }
    template = f"clusters/settings.html#{section}" if request.htmx and section else "clusters/settings.html"
    return render(request, template, context)


def _my_address(request: HttpRequest, sources: list[str]) -> str | None:
    """The address the browser comes from, offered as a source when it is one and not yet trusted.
    It is where the page is read from, not necessarily where the database clients run."""
    address = client_address(request)
    try:
        shown = firewall.display(firewall.parse_source(address))
    except firewall.InvalidSource:
        return None
    return None if sources and firewall.allows(sources, shown) else shown


@require_GET
def cluster_settings(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return render_settings_tab(request, cluster)


@require_http_methods(["GET", "POST"])
def resize_card(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = ResizeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        size, num_nodes = form.cleaned_data["size"], form.cleaned_data["num_nodes"]
        try:
            resize.resize_cluster(cluster, size or cluster.plan_slug, num_nodes=num_nodes)
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            if num_nodes is not None:
                notice = _("Changing “%(name)s” to %(n)s node(s).") % {"name": cluster.name, "n": num_nodes}
            else:
                notice = _("Resizing “%(name)s” to %(plan)s; PostgreSQL restarts.") % {
                    "name": cluster.name,
                    "plan": size,
                }
            messages.info(request, notice)
            # The whole page again: its header follows the resize like any other job.
            return go_to(request, reverse("clusters:settings", args=[cluster.pk]))
    return render_settings_tab(request, cluster, section="resize-card", resize_form=form)


@require_http_methods(["GET", "POST"])
def config_card(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = ConfigForm(request.POST or None, current=config.current_config(cluster))
    saved = False
    if request.method == "POST" and form.is_valid():
        try:
            current = config.update_config(cluster, form.changes())
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            saved = bool(form.changed_data)
            form = ConfigForm(current=current)
    return render_settings_tab(request, cluster, section="config-card", config_form=form, config_saved=saved)
