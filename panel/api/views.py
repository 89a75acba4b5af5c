"""The account's "API tokens" page (make a token, shown once; list and revoke them) and the API's
documentation page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from panel.api import services
from panel.api.forms import TokenForm
from panel.api.models import ApiToken
from panel.core.errors import ServiceError
from panel.core.web import PanelRequest, add_service_error


@require_http_methods(["GET", "POST"])
def tokens(request: PanelRequest) -> HttpResponse:
    new_token = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            token, new_token = services.create_token(
                request.user, form.cleaned_data["name"], form.cleaned_data["scopes"]
            )
        except ServiceError as exc:
            add_service_error(form, exc)
        else:
            form = TokenForm()
    context = {
        "form": form,
        "tokens": services.tokens_of(request.user),
        "new_token": new_token,
        "api_url": request.build_absolute_uri("/v2/"),
    }
    response = render(request, "api/tokens.html", context)
    if new_token:
        response["Cache-Control"] = "no-store"  # the plaintext must not stay in a cache
    return response


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    # Someone else's token is a 404, like one that does not exist.
    token = get_object_or_404(ApiToken, pk=token_id, owner=request.user)
    try:
        services.revoke_token(token)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, _("Token “%(name)s” revoked.") % {"name": token.name})
    return redirect("api:tokens")


@login_not_required
@require_safe
def docs(request: HttpRequest) -> HttpResponse:
    """The API's documentation: Swagger UI (vendored) rendering the schema at /v2/openapi.json.
    Public like the schema it shows: it tells nothing the schema does not, and a script's author
    may hold a token without a panel login. Calls made from it carry the token typed into its
    Authorize dialog, never the session (the API reads no cookie)."""
    return render(request, "api/docs.html", {"schema_url": reverse("v2:openapi-json")})
