"""The staff Nodes page: each node's capacity, clusters (a page at a time), last heartbeat and how
long its last reconciler round and metrics collection took; drain and activate."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from panel.clusters import hooks
from panel.clusters.models import CycleKind, NodeState
from panel.clusters.services import cycles, nodes
from panel.core.errors import ServiceError
from panel.core.paging import paginate
from panel.core.web import PanelRequest


@require_GET
@staff_member_required(login_url="login")
def node_list(request: PanelRequest) -> HttpResponse:
    last = cycles.last_cycles()
    rows = []
    for room in nodes.all_usage():
        node = room.node
        # Each node's clusters a page at a time, each node with its own page parameter.
        clusters = paginate(request, node.clusters.select_related("owner"), param=f"{node.name}-page")
        rounds = [(kind.label, kind.value, last.get((node.pk, kind.value))) for kind in CycleKind]
        others = nodes.members_of_others(node)
        full = hooks.disk_full_among([*clusters.rows, *others])
        rows.append(
            {
                "usage": room,
                "node": node,
                "clusters": clusters,
                "cycles": rounds,
                "full": full,
                "others": others,
            }
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
