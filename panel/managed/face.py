"""What the other apps (the API) may use of managed, besides its models and its pure lib: the one
door, kept by pyproject.toml's contract "other apps reach managed through its face". A name is
here because an app outside managed uses it; add one here rather than import past the face."""

from panel.managed.services import autoscale, create, logical_replication, maintenance, metrics, tags

__all__ = ["autoscale", "create", "logical_replication", "maintenance", "metrics", "tags"]
