"""The Overview's members card of a cluster with standbys: the list (polled) and the switchover
form; a one-member cluster's card says it has no standby (and a switchover there is refused with
its code). Thin: ownership, form, one service call, the partial again."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from panel.clusters.forms import SwitchoverForm
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.standbys.services import members
from panel.clusters.standbys.services import switchover as switchover_service
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, submit

TEMPLATE = "clusters/_members.html"
EVENTS_CHANGED = "cluster-events-changed"  # the event templates/clusters/detail.html's events list listens to


def _render(request: HttpRequest, cluster: Cluster, form: SwitchoverForm, notice: str = "") -> HttpResponse:
    try:
        rows = members.list_members(cluster)
    except ServiceError:
        rows = []
    form.set_members([row.name for row in rows if row.role == "standby"])
    shared = len({row.node for row in rows}) == 1
    context = {"cluster": cluster, "members": rows, "form": form, "notice": notice, "shared_node": shared}
    return render(request, TEMPLATE, context)


@require_GET
def members_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return _render(request, cluster, SwitchoverForm())


@require_POST
def switchover(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = SwitchoverForm(request.POST)
    notice = ""
    primary = submit(form, lambda data: switchover_service.switchover(cluster, data["to"] or None))
    if primary is not REFUSED:
        notice = _("%(member)s is the primary now.") % {"member": primary}
        form = SwitchoverForm()
    response = _render(request, cluster, form, notice)
    # The switchover is over (done or refused): the Overview's events list fetches itself again.
    return trigger_client_event(response, EVENTS_CHANGED)
