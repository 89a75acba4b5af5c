"""The one exception a service raises for the user to read."""

from __future__ import annotations


class ServiceError(Exception):
    """A refusal or failure to show where the user acted; ``field`` names the form field."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
