"""What the other apps may use of insights, besides its models and its pure lib: the one door,
kept by pyproject.toml's contract "other apps reach insights through its face". A name is here
because an app outside insights uses it; add one here rather than import past the face."""

from panel.insights.prometheus import exposition
from panel.insights.services import alerts
from panel.insights.services.alerts import notify_owner

__all__ = ["alerts", "exposition", "notify_owner"]
