"""The Quotas tab's forms: thin, the service validates (sizes as setquota takes them)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.core.forms import PanelForm
from panel.quotas.models import QuotaKind

SIZE_HELP = _("Bytes, or a whole number with K, M, G or T (100M, 2G). 0: no limit.")


class QuotaForm(PanelForm):
    kind = forms.ChoiceField(label=_("On"), choices=QuotaKind.choices, initial=QuotaKind.DATABASE)
    name = forms.CharField(label=_("Database or user"), max_length=63)
    space_soft = forms.CharField(label=_("Space soft limit"), max_length=24, initial="0", help_text=SIZE_HELP)
    space_hard = forms.CharField(label=_("Space hard limit"), max_length=24, initial="0")
    files_soft = forms.CharField(
        label=_("Relations soft limit"),
        max_length=24,
        initial="0",
        help_text=_("Tables, indexes, sequences… (10k = 10,000)."),
    )
    files_hard = forms.CharField(label=_("Relations hard limit"), max_length=24, initial="0")


class GraceForm(PanelForm):
    space_grace = forms.CharField(label=_("Space grace period (seconds)"), max_length=12)
    files_grace = forms.CharField(label=_("Relations grace period (seconds)"), max_length=12)
