"""The Backups tab's forms: "Back up now", and restore into a new cluster (a moment or a fork)."""

from __future__ import annotations

import datetime as dt

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.clusters.lib.plans import PLANS
from panel.core.forms import PanelForm


class BackupNowForm(PanelForm):
    backup_type = forms.ChoiceField(
        label=_("Type"),
        choices=[("full", _("Full")), ("diff", _("Differential")), ("incr", _("Incremental"))],
        initial="full",
    )


class RestoreForm(PanelForm):
    """A new cluster from the backups: at ``time`` (UTC, inside the window) or the latest point."""

    name = forms.CharField(label=_("New cluster name"), max_length=63)
    point = forms.ChoiceField(
        label=_("Restore to"),
        choices=[("time", _("A moment in the recovery window")), ("latest", _("The latest point (fork)"))],
        initial="latest",
        widget=forms.RadioSelect,
    )
    time = forms.DateTimeField(
        label=_("Moment (UTC)"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S"),
    )
    plan = forms.ChoiceField(label=_("Plan"), choices=[(plan.slug, plan.slug) for plan in PLANS])

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("point") == "time":
            moment = data.get("time")
            if moment is None:
                self.add_error("time", _("Choose the moment to restore to."))
            else:
                # The picker has no time zone: the panel's times are UTC.
                data["time"] = moment.replace(tzinfo=dt.UTC)
        else:
            data["time"] = None
        return data


def limits(start: dt.datetime | None, end: dt.datetime | None) -> dict[str, str]:
    """The picker's min and max: the recovery window, in UTC."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    out = {}
    if start is not None:
        out["min"] = start.astimezone(dt.UTC).strftime(fmt)
    if end is not None:
        out["max"] = end.astimezone(dt.UTC).strftime(fmt)
    return out
