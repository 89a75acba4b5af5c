"""The Settings tab's Configuration card: the PostgreSQL settings the owner may change
(``services.config``), each with its unit, range and current value."""

from __future__ import annotations

import uuid

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from panel.clusters.forms import ConfigForm
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import config
from panel.core.errors import ServiceError
from panel.core.web import add_service_error


@require_http_methods(["GET", "POST"])
def config_card(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
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
    context = {"cluster": cluster, "config_form": form, "config_saved": saved}
    return render(request, "clusters/settings.html#config-card", context)
