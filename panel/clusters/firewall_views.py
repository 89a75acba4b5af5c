"""Trusted sources on the Settings tab: add one, remove one. Each view: the ownership lookup, the
form, one service call (``services.firewall``), the section again (an HTMX swap) or the page."""

from __future__ import annotations

import uuid

from django.http import HttpResponse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from panel.clusters.forms import TrustedSourceForm
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import firewall
from panel.clusters.settings_views import render_settings_tab
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, PanelRequest, submit

SECTION = "trusted-sources"


@require_POST
def trusted_source_add(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = TrustedSourceForm(request.POST)
    sources = submit(form, lambda data: firewall.add_trusted_source(cluster, data["source"]))
    if sources is REFUSED:
        return render_settings_tab(request, cluster, section=SECTION, source_form=form)
    notice = _("Trusted source “%(source)s” added.") % {"source": sources[-1]}
    return render_settings_tab(request, cluster, section=SECTION, source_notice=notice)


@require_POST
def trusted_source_remove(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    source = request.POST.get("source", "")
    try:
        firewall.remove_trusted_source(cluster, source)
    except ServiceError as exc:
        return render_settings_tab(request, cluster, section=SECTION, source_error=exc.message)
    notice = _("Trusted source “%(source)s” removed.") % {"source": source}
    return render_settings_tab(request, cluster, section=SECTION, source_notice=notice)
