"""Who may see and act on which cluster: the one lookup every view of every app goes through
(healthchecks' ``_get_check_for_user``). It returns a Cluster, so it lives in clusters, not in
panel.core (which imports no app); the apps built on clusters import it from here."""

from __future__ import annotations

import uuid
from typing import cast

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from panel.clusters.models import Cluster


def clusters_for(user: User) -> QuerySet[Cluster]:
    """Clusters a user may see and act on: their own, or all for staff."""
    qs = Cluster.objects.all()
    if not getattr(user, "is_staff", False):
        qs = qs.filter(owner=user)
    return qs


def get_cluster_for_user(request: HttpRequest, cluster_id: uuid.UUID) -> Cluster:
    """The cluster if the user may see it (owner or staff); a 404 for everyone else."""
    # LoginRequiredMiddleware lets only a signed-in user through to a view.
    return get_object_or_404(clusters_for(cast(User, request.user)), pk=cluster_id)
