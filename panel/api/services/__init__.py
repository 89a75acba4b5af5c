"""One function per user action on tokens and the API.

- ``tokens``: make, list and revoke personal access tokens; who a bearer token belongs to.
- ``databases``: clusters, pages of them and the options for a new one, in the API's shapes.
"""

from panel.api.services.databases import Page, connection, database, options, paginate
from panel.api.services.tokens import (
    authenticate,
    create_token,
    parse_scopes,
    revoke_token,
    tokens_of,
)

__all__ = [
    "Page",
    "authenticate",
    "connection",
    "create_token",
    "database",
    "options",
    "paginate",
    "parse_scopes",
    "revoke_token",
    "tokens_of",
]
