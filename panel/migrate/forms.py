"""The Migration page's form: the server to migrate from."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.core.forms import PanelForm


class MigrationForm(PanelForm):
    """What the managed service's migration form asks; the checks are the service's."""

    host = forms.CharField(label=_("Host"), max_length=255)
    port = forms.IntegerField(label=_("Port"), min_value=1, max_value=65535, initial=5432)
    dbname = forms.CharField(label=_("Database"), max_length=63, initial="postgres")
    username = forms.CharField(label=_("User"), max_length=63)
    password = forms.CharField(label=_("Password"), max_length=1024, widget=forms.PasswordInput)
    disable_ssl = forms.BooleanField(label=_("Connect without SSL"), required=False)
    ignore_dbs = forms.CharField(
        label=_("Databases to leave out"),
        required=False,
        max_length=2000,
        help_text=_("Names separated by commas."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["disable_ssl"].widget.attrs["class"] = "form-check-input"

    def clean_ignore_dbs(self) -> list[str]:
        return [name.strip() for name in self.cleaned_data["ignore_dbs"].split(",") if name.strip()]
