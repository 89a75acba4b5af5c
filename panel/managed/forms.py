"""The Settings tab's maintenance window form (the service checks the values too)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.core.forms import PanelForm
from panel.managed.models import Weekday


class MaintenanceWindowForm(PanelForm):
    day = forms.ChoiceField(label=_("Day"), choices=Weekday.choices)
    hour = forms.TypedChoiceField(
        label=_("Hour (UTC)"), choices=[(h, f"{h:02d}:00") for h in range(24)], coerce=int
    )
