"""Personal access tokens: make one (its plaintext returned once), list, revoke, and tell who a
bearer token belongs to."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from panel.api.models import ApiToken, Scope
from panel.core.errors import N_, ServiceError

TOKEN_PREFIX = "pgp_"
# last_used_at is written at most this often, so that a busy client does not write on every call.
LAST_USED_RESOLUTION = dt.timedelta(minutes=1)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes in their canonical order, or a ServiceError naming the unknown ones."""
    wanted = {scope.strip() for scope in scopes if scope.strip()}
    unknown = sorted(wanted - set(Scope.values))
    if unknown:
        raise ServiceError(
            N_("Unknown scope: %(scopes)s. Choose from %(known)s."),
            field="scopes",
            code="token.scope_unknown",
            params={"scopes": ", ".join(unknown), "known": ", ".join(Scope.values)},
        )
    if not wanted:
        raise ServiceError(
            N_("Choose at least one scope."), field="scopes", code="token.scope_missing", params={}
        )
    return [scope for scope in Scope.values if scope in wanted]


def create_token(owner: User, name: str, scopes: Iterable[str]) -> tuple[ApiToken, str]:
    """A new token and its plaintext, which is not kept anywhere: the caller shows it once."""
    scope_list = parse_scopes(scopes)
    name = name.strip() or _("API token")
    for _attempt in range(5):
        prefix = secrets.token_hex(6)
        plaintext = f"{TOKEN_PREFIX}{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                token = ApiToken.objects.create(
                    owner=owner,
                    name=name[:100],
                    prefix=prefix,
                    secret_hash=_hash(plaintext),
                    scopes=" ".join(scope_list),
                )
        except IntegrityError:  # the same 12-hex-digit prefix twice: draw again
            continue
        return token, plaintext
    raise ServiceError(N_("Could not make a token; try again."), code="token.create_failed", params={})


def tokens_of(owner: User | None = None) -> QuerySet[ApiToken]:
    """Every token (of ``owner`` when given), the newest first, revoked ones included."""
    tokens = ApiToken.objects.select_related("owner")
    return tokens.filter(owner=owner) if owner is not None else tokens


def revoke_token(token: ApiToken) -> ApiToken:
    """The token refuses every call from now on."""
    if not token.is_active:
        raise ServiceError(
            N_("The token “%(name)s” is already revoked."),
            code="token.already_revoked",
            params={"name": token.name},
        )
    token.revoke()
    return token


def authenticate(bearer: str) -> tuple[User, ApiToken] | None:
    """The owner and the token a bearer token stands for; None for an unknown, malformed or
    revoked token, or an account that is no longer active."""
    if not bearer.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, _secret = bearer.removeprefix(TOKEN_PREFIX).partition("_")
    if not sep or not prefix:
        return None
    token = ApiToken.objects.active().select_related("owner").filter(prefix=prefix).first()
    # Compared in constant time even when no row matched, so that timing tells nothing.
    stored = token.secret_hash if token is not None else "0" * 64
    if not hmac.compare_digest(_hash(bearer), stored) or token is None:
        return None
    if not token.owner.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token.owner, token
