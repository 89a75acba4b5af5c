"""The one exception a service raises for the user to read."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal or failure to show where the user acted; ``field`` names the form field and
    ``code`` (optional, stable, e.g. ``pool.name_taken``) says what kind of refusal it is, so an
    edge (the API's status, a test) never has to read the message."""

    def __init__(self, message: str, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.code = code
