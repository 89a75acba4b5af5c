"""The staff Nodes page: each node's capacity, clusters and last heartbeat; drain and activate."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from panel.clusters.models import NodeState
from panel.clusters.services import nodes
from panel.core.errors import ServiceError


@require_GET
@staff_member_required(login_url="login")
def node_list(request: HttpRequest) -> HttpResponse:
    rows = []
    for room in nodes.all_usage():
        rows.append(
            {"usage": room, "node": room.node, "clusters": list(room.node.clusters.select_related("owner"))}
        )
    template = "clusters/nodes.html#table" if request.htmx else "clusters/nodes.html"
    return render(request, template, {"rows": rows, "dead_after": settings.PANEL_NODE_DEAD_AFTER})


@require_POST
@staff_member_required(login_url="login")
def node_state(request: HttpRequest, name: str, state: str) -> HttpResponse:
    if state not in NodeState.values:
        return redirect("clusters:nodes")
    try:
        node = nodes.set_state(name, state)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        if state == NodeState.DRAINING:
            messages.success(
                request,
                _("Node “%(node)s” is draining: its clusters stay, new ones go elsewhere.")
                % {"node": node.name},
            )
        else:
            messages.success(request, _("Node “%(node)s” takes new clusters again.") % {"node": node.name})
    return redirect("clusters:nodes")
