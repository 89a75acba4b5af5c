"""One function per user action on tokens and the API.

- ``tokens``: make, list and revoke personal access tokens; who a bearer token belongs to.
"""

from panel.api.services.tokens import (
    authenticate,
    create_token,
    parse_scopes,
    revoke_token,
    tokens_of,
)

__all__ = [
    "authenticate",
    "create_token",
    "parse_scopes",
    "revoke_token",
    "tokens_of",
]
