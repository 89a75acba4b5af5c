"""URLs: login, admin, and one include per app."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from panel.accounts import views as account_views
from panel.api import views as api_views
from panel.api.v2.api import urls as api_urls


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    """The icon base.html links, for the pages that link none."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


urlpatterns = [
    path("", RedirectView.as_view(pattern_name="clusters:list", permanent=False)),
    path("login/", login_not_required(auth_views.LoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("i18n/setlang/", account_views.set_language, name="set_language"),
    # Browsers ask for /favicon.ico on pages that link no icon (the admin, error pages).
    path("favicon.ico", login_not_required(favicon)),
    path("clusters/", include("panel.clusters.urls")),
    path("clusters/<uuid:cluster_id>/pools/", include("panel.pools.urls")),
    path("clusters/<uuid:cluster_id>/quotas/", include("panel.quotas.urls")),
    path("clusters/<uuid:cluster_id>/logs/", include("panel.logs.urls")),
    path("clusters/<uuid:cluster_id>/backups/", include("panel.backups.urls")),
    path("clusters/<uuid:cluster_id>/migration/", include("panel.migrate.urls")),
    path("clusters/<uuid:cluster_id>/logsinks/", include("panel.logsink.urls")),
    path("", include("panel.insights.urls")),  # /metrics (token auth, no login)
    path("", include("panel.managed.urls")),  # /metrics/clusters/<id> (basic auth), maintenance card
    path("clusters/<uuid:cluster_id>/benchmarks/", include("benchmarks.urls")),
    path("account/", include("panel.api.urls")),
    # Before the API's include, whose last pattern answers every other /v2/ path with a 404.
    path("v2/docs", api_views.docs, name="api-docs"),
    path("v2/", include(api_urls())),  # the API: bearer tokens, no login, no CSRF (panel/api/v2)
]
