"""Cluster pages. Each view fetches the cluster through its ownership helper, validates a form,
calls one service function and returns a redirect, a page or an HTMX partial."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from panel.clusters import hooks, ownership, services
from panel.clusters.connection import SECRET_FORMATS, connection_box
from panel.clusters.forms import AttachClusterForm, CreateClusterForm, DeleteClusterForm, NameForm
from panel.clusters.lib.connstr import ConnectionDetails
from panel.clusters.models import Cluster
from panel.clusters.ownership import get_cluster_for_user
from panel.clusters.services import attach, roles
from panel.core.errors import ServiceError
from panel.core.paging import paginate
from panel.core.web import REFUSED, PanelRequest, add_service_error, go_to, submit


def _detail_redirect(cluster: Cluster) -> HttpResponse:
    return redirect("clusters:detail", cluster_id=cluster.pk)


# --- list, create, attach ---------------------------------------------------------------------


@require_GET
def cluster_list(request: PanelRequest) -> HttpResponse:
    # A page at a time: a panel of hundreds of clusters renders 25 rows (issue 41).
    paged = paginate(
        request, ownership.clusters_for(request.user).select_related("owner", "node", "replica_of")
    )
    context = {
        "clusters": paged.rows,
        "paged": paged,
        "any_busy": any(c.is_busy for c in paged.rows),
        "full": hooks.disk_full_among(paged.rows),
        "may_attach": attach.may_attach(request.user),
    }
    template = "clusters/list.html#table" if request.htmx else "clusters/list.html"
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
def cluster_create(request: PanelRequest) -> HttpResponse:
    form = CreateClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            cluster = services.create_cluster(
                request.user,
                name=data["name"],
                plan_slug=data["plan"],
                version=data["version"],
                node=data.get("node") or None,
                num_nodes=data["num_nodes"],
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            # The message leaves the page when the creation is over (panel.js, data-while-busy).
            messages.success(
                request,
                _("Cluster “%(name)s” is being created.") % {"name": cluster.name},
                extra_tags="while-busy",
            )
            return _detail_redirect(cluster)
    return render(request, "clusters/create.html", {"form": form})


@require_http_methods(["GET", "POST"])
def cluster_attach(request: PanelRequest) -> HttpResponse:
    if not attach.may_attach(request.user):
        return render(request, "clusters/attach_forbidden.html", status=403)
    form = AttachClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = attach.attach_cluster(
                request.user, name=form.cleaned_data["name"], server=form.server()
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            messages.success(request, _("Server “%(name)s” attached.") % {"name": cluster.name})
            return _detail_redirect(cluster)
    return render(request, "clusters/attach.html", {"form": form})


# --- the cluster page: overview, progress, connection details -------------------------------------


def _requested_details(cluster: Cluster, params: Any) -> ConnectionDetails:
    """The details for the ``user``, ``database`` and ``node`` (primary, standby) query
    parameters (blank: the defaults)."""
    return services.connection_details(
        cluster,
        user=params.get("user") or None,
        database=params.get("database") or None,
        standby=params.get("node") == "standby",
    )


def _connection_context(cluster: Cluster, params: Any, *, reveal: bool) -> dict[str, Any]:
    node = "standby" if params.get("node") == "standby" else "primary"
    return connection_box(
        params,
        lambda: _requested_details(cluster, params),
        reveal=reveal,
        selection=("user", "database"),
        url_names="clusters",
        url_args=[cluster.pk],
        extra={"node": node} if cluster.standby_port else None,
        cluster=cluster,
        users=list(cluster.users.all()),
        databases=list(cluster.databases.all()),
        node=node,
    )


@require_GET
def cluster_detail(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    context = _connection_context(cluster, request.GET, reveal=False)
    context.update(
        active_tab="overview",
        overview=services.overview(cluster),
        events=cluster.events.all()[:10],
        delete_form=DeleteClusterForm(),
    )
    return render(request, "clusters/detail.html", context)


@require_GET
def cluster_live(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """The part of every cluster page a busy cluster polls: header, progress and alerts.

    The poller sends the status it shows; when the status has moved on, the page's tab is told
    to fetch itself once, since what it shows depends on the status.
    """
    try:
        cluster = get_cluster_for_user(request, cluster_id)
    except Http404:
        # Deleted while the page followed it (or never the user's: the same 404 either way);
        # htmx follows HX-Redirect whatever the status, so the open page goes to the list.
        gone = HttpResponseNotFound()
        gone["HX-Redirect"] = reverse("clusters:list")
        return gone
    response = render(request, "clusters/cluster_base.html#live", {"cluster": cluster})
    if request.GET.get("status") != cluster.status:
        trigger_client_event(response, "cluster-status-changed")
    return response


def _connection_partial(request: HttpRequest, cluster_id: uuid.UUID, *, reveal: bool) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    context = _connection_context(cluster, request.GET, reveal=reveal)
    return render(request, "clusters/detail.html#connection", context)


@require_GET
def connection(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _connection_partial(request, cluster_id, reveal=False)


@never_cache
@require_GET
def connection_reveal(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _connection_partial(request, cluster_id, reveal=True)


@never_cache
@require_GET
def connection_secret(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    """One secret-bearing value as plain text, for the copy buttons of the hidden password."""
    cluster = get_cluster_for_user(request, cluster_id)
    fmt = request.GET.get("format", "uri")
    if fmt not in SECRET_FORMATS:
        return HttpResponse(_("Unknown format."), status=400, content_type="text/plain; charset=utf-8")
    try:
        details = _requested_details(cluster, request.GET)
    except ServiceError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain; charset=utf-8")
    text = details.password if fmt == "password" else details.render(fmt)
    return HttpResponse(text, content_type="text/plain; charset=utf-8")


@require_GET
def ca_certificate(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    if not cluster.ca_certificate:
        raise Http404(_("This cluster has no CA certificate."))
    response = HttpResponse(cluster.ca_certificate, content_type="application/x-pem-file")
    response["Content-Disposition"] = content_disposition_header(
        as_attachment=True, filename=f"{cluster.name}-ca-certificate.crt"
    )
    return response


# --- actions -------------------------------------------------------------------------------------


@require_POST
def cluster_action(request: HttpRequest, cluster_id: uuid.UUID, action: str) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    if action not in services.ACTIONS:
        raise Http404
    try:
        services.request_action(cluster, action)
    except ServiceError as exc:
        messages.error(request, exc.message)
    return _detail_redirect(cluster)


@require_POST
def cluster_retry(request: HttpRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        services.retry_cluster(cluster)
    except ServiceError as exc:
        messages.error(request, exc.message)
    return _detail_redirect(cluster)


@require_http_methods(["GET", "POST"])
def cluster_delete(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    form = DeleteClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            if form.cleaned_data["confirm_name"] == cluster.name:
                hooks.delete_choices(cluster, request.POST)  # e.g. keep the backups or not
            gone = services.request_delete(cluster, confirm_name=form.cleaned_data["confirm_name"])
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            if gone:
                messages.success(request, _("Server “%(name)s” detached.") % {"name": cluster.name})
            else:
                messages.info(
                    request,
                    _("Deleting cluster “%(name)s”; it leaves this list when its files are gone.")
                    % {"name": cluster.name},
                )
            url = reverse("clusters:list")
            return go_to(request, url)
    template = "clusters/delete.html#form" if request.htmx else "clusters/delete.html"
    return render(request, template, {"cluster": cluster, "delete_form": form})


# --- users and databases -----------------------------------------------------------------------


def _render_users_tab(
    request: PanelRequest,
    cluster: Cluster,
    *,
    user_form: NameForm | None = None,
    database_form: NameForm | None = None,
    **extra: Any,
) -> HttpResponse:
    """The Users & Databases tab: the whole page, or only its content for HTMX swaps."""
    context = {
        "cluster": cluster,
        "active_tab": "users",
        "users": cluster.users.all(),
        "databases": cluster.databases.all(),
        "user_form": user_form or NameForm(prefix="user"),
        "database_form": database_form or NameForm(prefix="database"),
        "delete_form": DeleteClusterForm(),
        **extra,
    }
    template = "clusters/users.html#tab" if request.htmx else "clusters/users.html"
    response = render(request, template, context)
    if "new_secret" in extra:
        response["Cache-Control"] = "no-store"
    return response


@require_GET
def cluster_users(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    cluster = get_cluster_for_user(request, cluster_id)
    return _render_users_tab(request, cluster)


@require_POST
def user_add(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _add_on_users_tab(
        request,
        cluster_id,
        "user",
        roles.add_user,
        notice=lambda db_user: _("User “%(name)s” added.") % {"name": db_user.name},
        new_secret=lambda db_user: (db_user.name, db_user.password),
    )


def _add_on_users_tab(
    request: PanelRequest, cluster_id: uuid.UUID, prefix: str, add: Any, **done: Any
) -> HttpResponse:
    """The tab's add form of ``prefix`` (user, database): ``add(cluster, name)`` (a roles service),
    then the tab with ``done`` built from what it made, or the form with the refusal on it."""
    cluster = get_cluster_for_user(request, cluster_id)
    form = NameForm(request.POST, prefix=prefix)
    made = submit(form, lambda data: add(cluster, data["name"]))
    if made is REFUSED:
        return _render_users_tab(request, cluster, **{f"{prefix}_form": form})
    return _render_users_tab(request, cluster, **{key: make(made) for key, make in done.items()})


def _on_users_tab(
    request: PanelRequest, cluster_id: uuid.UUID, action: Any, *, error_key: str, **done: Any
) -> HttpResponse:
    """Run ``action(cluster)`` (a roles service) and show the tab again: with the service's
    refusal next to the list it is about (``error_key``), or with ``done`` (a notice, a secret)
    built from what the action returned."""
    cluster = get_cluster_for_user(request, cluster_id)
    try:
        result = action(cluster)
    except ServiceError as exc:
        refusal: dict[str, Any] = {error_key: exc.message}
        return _render_users_tab(request, cluster, **refusal)
    return _render_users_tab(request, cluster, **{key: make(result) for key, make in done.items()})


def _typed(request: HttpRequest) -> str:
    """The name typed in the confirmation modal; none at all is no confirmation either."""
    return request.POST.get("confirm_name", "")


@require_POST
def user_delete(request: PanelRequest, cluster_id: uuid.UUID, name: str) -> HttpResponse:
    return _on_users_tab(
        request,
        cluster_id,
        lambda cluster: roles.delete_user(cluster, name, confirm_name=_typed(request)),
        error_key="user_error",
        notice=lambda _result: _("User “%(name)s” deleted.") % {"name": name},
    )


@require_POST
def user_reset_password(request: PanelRequest, cluster_id: uuid.UUID, name: str) -> HttpResponse:
    return _on_users_tab(
        request,
        cluster_id,
        lambda cluster: roles.reset_password(cluster, name),
        error_key="user_error",
        notice=lambda db_user: _("Password of “%(name)s” reset.") % {"name": db_user.name},
        new_secret=lambda db_user: (db_user.name, db_user.password),
    )


@require_POST
def database_add(request: PanelRequest, cluster_id: uuid.UUID) -> HttpResponse:
    return _add_on_users_tab(
        request,
        cluster_id,
        "database",
        roles.add_database,
        notice=lambda database: _("Database “%(name)s” added.") % {"name": database.name},
    )


@require_POST
def database_delete(request: PanelRequest, cluster_id: uuid.UUID, name: str) -> HttpResponse:
    return _on_users_tab(
        request,
        cluster_id,
        lambda cluster: roles.delete_database(cluster, name, confirm_name=_typed(request)),
        error_key="database_error",
        notice=lambda _result: _("Database “%(name)s” deleted.") % {"name": name},
    )
