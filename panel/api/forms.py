"""The form that makes a personal access token."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.api.models import Scope
from panel.core.forms import PanelForm


class TokenForm(PanelForm):
    name = forms.CharField(
        label=_("Name"),
        max_length=100,
        help_text=_("What uses it, e.g. “terraform” or “CI deploy”."),
    )
    scopes = forms.MultipleChoiceField(
        label=_("Scopes"),
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.READ],
        error_messages={"required": _("Choose at least one scope.")},
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        # PanelForm gives every widget form-control; checkboxes take Bootstrap's own classes.
        self.fields["scopes"].widget.attrs.pop("class", None)
