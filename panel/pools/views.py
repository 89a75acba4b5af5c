"""Connection Pools tab. Each view fetches the cluster through the clusters' ownership helper and
the pool through ``cluster.pools`` (404 for anyone else), validates a form, calls one service
function and returns a redirect, a page or an HTMX partial."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from panel.clusters.face import SECRET_FORMATS, connection_box, get_cluster_for_user
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.web import REFUSED, PanelRequest, go_to, submit
from panel.pools import services
from panel.pools.forms import CreatePoolForm, PoolForm
from panel.pools.models import ConnectionPool

PLAIN_TEXT = "text/plain; charset=utf-8"


def _get_pool(cluster: Cluster, pool_id: uuid.UUID) -> ConnectionPool:
    return get_object_or_404(cluster.pools, pk=pool_id)


# --- the tab: budget, live table, create form -------------------------------------------------------


def _render_tab(
    request: PanelRequest, cluster: Cluster, *, form: CreatePoolForm | None = None, **extra: Any
) -> HttpResponse:
    """The whole tab, or only its content for HTMX swaps."""
    context = {
        "cluster": cluster,
        "active_tab": "pools",
        "overview": services.pools_overview(cluster),
        "form": form or CreatePoolForm(cluster=cluster),
        "poolable": services.poolable(cluster),
        **extra,
    }
    context["create_open"] = bool(form is not None and form.errors) or not context["overview"].pools
    template = "pools/list.html#tab" if request.htmx else "pools/list.html"
    return render(request, template, context)


@require_GET
def pool_list(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return _render_tab(request, cluster)


@never_cache
@require_GET
def pool_stats(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The budget bar and the table with PgBouncer's live figures, polled every 3 s."""
    cluster = get_cluster_for_user(request, cluster_id)
    context = {"cluster": cluster, "overview": services.pools_overview(cluster)}
    return render(request, "pools/list.html#live", context)


# --- server connections the pools hold: the Overview's warning, release -------------------------------


@never_cache
@require_GET
def pool_slots(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The Overview's lock-out warning; it polls itself only while the cluster has pools."""
    cluster = get_cluster_for_user(request, cluster_id)
    return render(request, "pools/_slots.html", {"cluster": cluster, "slots": services.slot_usage(cluster)})


def _released_notice(released: int, name: str | None) -> str:
    if name is None:
        return ngettext(
            "%(n)s idle server connection closed; its slot is free for direct connections.",
            "%(n)s idle server connections closed; their slots are free for direct connections.",
            released,
        ) % {"n": released}
    return ngettext(
        "Pool “%(name)s”: %(n)s idle server connection closed; its clients stay connected.",
        "Pool “%(name)s”: %(n)s idle server connections closed; its clients stay connected.",
        released,
    ) % {"n": released, "name": name}


def _after_release(
    request: PanelRequest,
    cluster: Cluster,
    notice: str,
    *,
    error: bool = False,
    pool: ConnectionPool | None = None,
) -> HttpResponse:
    """The part of the page that asked: the Overview's warning or the Pools tab's live figures."""
    if request.htmx and request.htmx.target == "pools-slots":
        context: dict[str, Any] = {
            "cluster": cluster,
            "slots": services.slot_usage(cluster),
            "release_notice": notice,
        }
        return render(request, "pools/_slots.html", context)
    if request.htmx:
        context = {
            "cluster": cluster,
            "overview": services.pools_overview(cluster),
            "release_notice": notice,
            "release_error": error,
        }
        return render(request, "pools/list.html#live", context)
    (messages.error if error else messages.success)(request, notice)
    following = request.POST.get("next")
    if following == "detail" and pool is not None:
        return redirect("pools:detail", cluster_id=cluster.pk, pool_id=pool.pk)
    return redirect("clusters:detail" if following == "overview" else "pools:list", cluster_id=cluster.pk)


@require_POST
def pool_release(request: PanelRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    """Release idle server connections of one pool (a RECONNECT of it on PgBouncer's console)."""
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    try:
        released = services.release_pool(pool)
    except ServiceError as exc:
        return _after_release(request, cluster, exc.message, error=True, pool=pool)
    return _after_release(request, cluster, _released_notice(released, pool.name), pool=pool)


@require_POST
def pools_release(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """Release the idle server connections of every pool of the cluster (the warning's button)."""
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        released = services.release_all(cluster)
    except ServiceError as exc:
        return _after_release(request, cluster, exc.message, error=True)
    return _after_release(request, cluster, _released_notice(released, None))


@require_POST
def pool_create(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = CreatePoolForm(request.POST, cluster=cluster)
    # Returns once PgBouncer serves the pool (or refuses with PgBouncer's own words).
    pool = submit(
        form,
        lambda data: services.create_pool(
            cluster, data["name"], data["database"], data["user"] or None, data["mode"], data["size"]
        ),
    )
    if pool is REFUSED:
        return _render_tab(request, cluster, form=form)
    notice = _("Pool “%(name)s” created; it accepts connections now.") % {"name": pool.name}
    if not request.htmx:
        messages.success(request, notice)
        return redirect("pools:list", cluster_id=cluster.pk)
    return _render_tab(request, cluster, notice=notice, created=pool)


# --- one pool: connection details, edit, delete ------------------------------------------------------


def _requested_user(pool: ConnectionPool, params: Any) -> str | None:
    """The ``user`` query parameter, which only an inbound-user pool lets the client choose."""
    return (params.get("user") or None) if pool.is_inbound_user else None


def _connection_context(pool: ConnectionPool, params: Any, *, reveal: bool) -> dict[str, Any]:
    return connection_box(
        params,
        lambda: services.pool_connection_details(pool, user=_requested_user(pool, params)),
        reveal=reveal,
        selection=("user",),
        url_names="pools",
        url_args=[pool.cluster_id, pool.pk],
        pool=pool,
        users=list(pool.cluster.users.all()) if pool.is_inbound_user else [],
    )


def _render_pool_page(
    request: PanelRequest,
    cluster: Cluster,
    pool: ConnectionPool,
    *,
    form: PoolForm | None = None,
    **extra: Any,
) -> HttpResponse:
    context = _connection_context(pool, request.GET, reveal=False)
    used, total = services.pool_budget(cluster)
    context.update(
        cluster=cluster,
        active_tab="pools",
        budget_used=used,
        budget_total=total,
        budget_left=max(total - used, 0),
        idle_timeout=settings.PANEL_POOL_SERVER_IDLE_TIMEOUT,
        form=form or PoolForm(cluster=cluster, pool=pool),
        **extra,
    )
    template = "pools/detail.html#page" if request.htmx else "pools/detail.html"
    return render(request, template, context)


@require_GET
def pool_detail(request: PanelRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    return _render_pool_page(request, cluster, pool)


@require_POST
def pool_edit(request: PanelRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    form = PoolForm(request.POST, cluster=cluster, pool=pool)
    updated = submit(
        form,
        lambda data: services.update_pool(
            pool, data["database"], data["user"] or None, data["mode"], data["size"]
        ),
    )
    if updated is REFUSED:
        return _render_pool_page(request, cluster, pool, form=form)
    notice = _("Pool “%(name)s” updated; PgBouncer applied the change online.") % {"name": updated.name}
    if not request.htmx:
        messages.success(request, notice)
        return redirect("pools:detail", cluster_id=cluster.pk, pool_id=updated.pk)
    return _render_pool_page(request, cluster, updated, notice=notice)


@require_http_methods(["GET", "POST"])
def pool_delete(request: PanelRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    error = ""
    if request.method == "POST":
        try:
            disconnected = services.delete_pool(pool)
        except ServiceError as exc:
            error = exc.message
        else:
            messages.success(
                request,
                ngettext(
                    "Pool “%(name)s” deleted; %(n)s connected client was disconnected.",
                    "Pool “%(name)s” deleted; %(n)s connected clients were disconnected.",
                    disconnected,
                )
                % {"name": pool.name, "n": disconnected},
            )
            url = reverse("pools:list", kwargs={"cluster_id": cluster.pk})
            return go_to(request, url)
    # Counted again after a refused delete too: the pool still serves its clients.
    clients = services.connected_clients(pool)
    context = {"cluster": cluster, "pool": pool, "clients": clients, "error": error, "active_tab": "pools"}
    template = "pools/delete.html#form" if request.htmx else "pools/delete.html"
    return render(request, template, context)


def _connection_partial(
    request: HttpRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID, *, reveal: bool
) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    context = _connection_context(pool, request.GET, reveal=reveal)
    return render(request, "pools/detail.html#connection", {**context, "cluster": cluster})


@require_GET
def connection(request: HttpRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    return _connection_partial(request, cluster_id, pool_id, reveal=False)


@never_cache
@require_GET
def connection_reveal(request: HttpRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    return _connection_partial(request, cluster_id, pool_id, reveal=True)


@never_cache
@require_GET
def connection_secret(request: HttpRequest, cluster_id: uuid.UUID, pool_id: uuid.UUID) -> HttpResponse:
    """One secret-bearing value as plain text, for the copy buttons of the hidden password."""
    cluster = get_cluster_for_user(request, cluster_id)
    pool = _get_pool(cluster, pool_id)
    fmt = request.GET.get("format", "uri")
    if fmt not in SECRET_FORMATS:
        return HttpResponse(_("Unknown format."), status=400, content_type=PLAIN_TEXT)
    try:
        details = services.pool_connection_details(pool, user=_requested_user(pool, request.GET))
    except ServiceError as exc:
        return HttpResponse(exc.message, status=400, content_type=PLAIN_TEXT)
    text = details.password if fmt == "password" else details.render(fmt)
    return HttpResponse(text, content_type=PLAIN_TEXT)
