"""The Settings tab's Resize card: the plans (the current one marked, those that do not fit with
the reason) and the form that moves the cluster to another one (``services.resize``)."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from panel.clusters.forms import ResizeForm
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import resize
from panel.core.errors import ServiceError
from panel.core.web import add_service_error, go_to


def _card(request: HttpRequest, cluster: Cluster, form: ResizeForm) -> HttpResponse:
    choices = resize.plan_choices(cluster) if cluster.is_local else []
    context = {"cluster": cluster, "resize_form": form, "plan_choices": choices}
    return render(request, "clusters/settings.html#resize-card", context)


@require_http_methods(["GET", "POST"])
def resize_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = ResizeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            resize.resize_cluster(cluster, form.cleaned_data["size"])
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.info(
                request,
                _("Resizing “%(name)s” to %(plan)s; PostgreSQL restarts.")
                % {"name": cluster.name, "plan": form.cleaned_data["size"]},
            )
            # The whole page again: its header follows the resize like any other job.
            return go_to(request, reverse("clusters:settings", args=[cluster.pk]))
    return _card(request, cluster, form)
