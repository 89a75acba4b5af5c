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


class TagsForm(PanelForm):
    """A cluster's tags, as one line (the service checks each tag and how many)."""

    tags = forms.CharField(
        label=_("Tags"),
        required=False,
        max_length=4000,
        help_text=_("Separated by spaces or commas; letters, digits, ':', '-', '_' and '.'."),
    )

    def clean_tags(self) -> list[str]:
        return [name for name in self.cleaned_data["tags"].replace(",", " ").split() if name]


class AutoscaleForm(PanelForm):
    """Storage autoscale (the field names are the service's, so its refusals land on them)."""

    enabled = forms.BooleanField(
        label=_("Move to a larger plan when the disk fills up"),
        required=False,
        widget=forms.CheckboxInput(attrs={"class": "form-check-input"}),
    )
    threshold_percent = forms.IntegerField(
        label=_("Threshold (percent of the disk used)"), min_value=1, max_value=99
    )
    increment_gib = forms.IntegerField(label=_("Add at least (GiB of disk)"), min_value=1, max_value=10240)
