"""Every URL pattern of the project, found by walking Django's resolver, and how to fill its
parameters with the objects of a test.

A pattern added later is walked too: a parameter this module cannot fill fails the tests that use
it, with a message saying what to add, rather than being skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.urls.converters import IntConverter, PathConverter, StringConverter, UUIDConverter


@dataclass(frozen=True)
class Route:
    """One URL pattern: its namespaced name (None when unnamed) and its parameters."""

    name: str | None
    pattern: str
    params: dict[str, str] = field(default_factory=dict)  # parameter -> "uuid", "int", "str", "path"

    @property
    def is_admin(self) -> bool:
        return self.pattern.startswith("admin/")

    @property
    def is_cluster_object(self) -> bool:
        """Under a cluster: the owner's (or staff's) alone."""
        return "cluster_id" in self.params


def _kind(converter: object) -> str:
    if isinstance(converter, UUIDConverter):
        return "uuid"
    if isinstance(converter, IntConverter):
        return "int"
    if isinstance(converter, PathConverter):
        return "path"
    if isinstance(converter, StringConverter):
        return "str"
    return type(converter).__name__


def _walk(resolver: URLResolver, prefix: str, namespace: str, params: dict[str, str]) -> Iterator[Route]:
    for entry in resolver.url_patterns:
        pattern = entry.pattern
        here = dict(params)
        for key, converter in getattr(pattern, "converters", {}).items():
            here[key] = _kind(converter)
        regex = getattr(pattern, "regex", None)
        if not getattr(pattern, "converters", None) and regex is not None:
            for key in regex.groupindex:
                here[key] = "regex"
        if isinstance(entry, URLResolver):
            inner = namespace + (f"{entry.namespace}:" if entry.namespace else "")
            yield from _walk(entry, prefix + str(pattern), inner, here)
        elif isinstance(entry, URLPattern):
            name = f"{namespace}{entry.name}" if entry.name else None
            yield Route(name=name, pattern=prefix + str(pattern), params=here)


def all_routes() -> list[Route]:
    return list(_walk(get_resolver(), "", "", {}))


def url_for(route: Route, values: dict[str, object]) -> str:
    """The URL of ``route`` with its parameters taken from ``values`` (by parameter name, or
    ``"<url name>.<parameter>"`` for a value one URL needs of its own)."""
    if route.name is None:
        if route.pattern == "":
            return "/"
        if route.pattern.startswith("^static/"):
            return "/static/css/panel.css"
        raise AssertionError(
            f"unnamed URL pattern {route.pattern!r}: teach tests/security/urlwalk.py its URL"
        )
    kwargs: dict[str, object] = {}
    for key, kind in route.params.items():
        specific = f"{route.name}.{key}"
        if specific in values:
            kwargs[key] = values[specific]
        elif key in values:
            kwargs[key] = values[key]
        else:
            raise AssertionError(
                f"{route.name} ({route.pattern}) has a parameter {key!r} ({kind}) that the walk "
                "cannot fill: add it to the values of tests/security/test_web_urls.py"
            )
    return reverse(route.name, kwargs=kwargs)


def dummy_values(route: Route) -> dict[str, object]:
    """Values of the right type for a visitor who is turned away before any object is read."""
    filler = {"uuid": uuid.uuid4(), "int": 1, "str": "x", "path": "x", "regex": "x"}
    values = {key: filler[kind] for key, kind in route.params.items() if kind in filler}
    if "app_label" in values:
        values["app_label"] = "clusters"  # the admin's app list takes only installed apps
    return values
