"""Forms of the Insights tab: the time window of the charts, and an alert rule."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from panel.clusters.models import Cluster
from panel.core.forms import PanelForm
from panel.insights.models import AlertKind
from panel.insights.services import RANGES, ROLLUP_RETENTION

RANGE_CHOICES = [
    ("1h", _("1 h")),
    ("6h", _("6 h")),
    ("24h", _("24 h")),
    ("7d", _("7 d")),
    ("30d", _("30 d")),
]
DEFAULT_RANGE = "1h"
# A benchmark of a few seconds would be one or two collections wide: show some context around it.
MIN_WINDOW = dt.timedelta(minutes=10)


@dataclass(frozen=True)
class Window:
    """What the charts show: ``range_key`` for the last 1 h … 30 d, or "" for a fixed window."""

    start: dt.datetime
    end: dt.datetime
    range_key: str
    live: bool  # the window ends now: the charts refresh

    @property
    def query(self) -> str:
        if self.range_key:
            return urlencode({"range": self.range_key})
        params = {"start": self.start.isoformat()}
        if not self.live:
            params["end"] = self.end.isoformat()
        return urlencode(params)


def range_window(range_key: str, now: dt.datetime | None = None) -> Window:
    now = now or timezone.now()
    return Window(now - RANGES[range_key], now, range_key, True)


class WindowForm(forms.Form):
    """``?range=6h``, or ``?start=<iso>[&end=<iso>]`` (the benchmark run page's link)."""

    range = forms.ChoiceField(choices=RANGE_CHOICES, required=False)
    start = forms.DateTimeField(required=False)
    end = forms.DateTimeField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data
        start, end = data.get("start"), data.get("end")
        if end is not None and start is None:
            self.add_error("start", _("A window needs a start."))
        if start is not None and end is not None and end <= start:
            self.add_error("end", _("The end must be after the start."))
        return data

    def window(self, now: dt.datetime | None = None) -> Window:
        """The window asked for; call after ``is_valid()``. The default range when none was given."""
        now = now or timezone.now()
        data = self.cleaned_data
        start, end = data.get("start"), data.get("end")
        if start is None:
            return range_window(data.get("range") or DEFAULT_RANGE, now)
        live = end is None or end >= now
        end = min(end or now, now)
        start = max(start, now - ROLLUP_RETENTION)
        if end - start < MIN_WINDOW:
            # Centre a short window (a benchmark run) in MIN_WINDOW, never past now.
            pad = (MIN_WINDOW - (end - start)) / 2
            end = min(end + pad, now)
            start = end - MIN_WINDOW
        return Window(start, end, "", live)


class AlertRuleForm(PanelForm):
    """A rule's shape; the ranges (percentages, whole clients, durations) are ``save_rule``'s."""

    kind = forms.ChoiceField(label=_("Alert when"), choices=AlertKind.choices)
    threshold = forms.FloatField(label=_("Threshold"))
    duration_seconds = forms.IntegerField(
        label=_("For (seconds)"), initial=300, help_text=_("How long the figure stays at or above it.")
    )
    email = forms.CharField(
        label=_("Email"), required=False, help_text=_("Empty: the cluster owner's address.")
    )
    enabled = forms.BooleanField(label=_("Enabled"), required=False, initial=True)

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not cluster.is_local:
            self.fields["kind"].choices = [
                (value, label) for value, label in AlertKind.choices if value not in AlertKind.HOST_ONLY
            ]
        self.fields["enabled"].widget.attrs["class"] = "form-check-input"
        self.fields["threshold"].widget.attrs["step"] = "any"
