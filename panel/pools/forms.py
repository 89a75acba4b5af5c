"""Forms of the Connection Pools tab: they check the shape of the input; the services check the rules
(budget, duplicates, that the database and user exist) under the cluster's lock."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from panel.clusters.models import Cluster
from panel.core.forms import PanelForm
from panel.pools.lib.pgbouncer_ini import POOL_NAME_MAX, InvalidPoolName, validate_pool_name
from panel.pools.models import ConnectionPool, PoolMode

# Longer than any valid name, so the name rule (not Django's max_length) explains a refusal.
NAME_INPUT_MAX = 200


class PoolForm(PanelForm):
    """Database, user, mode and size: everything an update replaces."""

    database = forms.ChoiceField(label=_("Database"))
    user = forms.ChoiceField(
        label=_("User"),
        required=False,
        help_text=_(
            "Leave it empty to log in to the server as whichever user connects (the inbound user), "
            "or pick a user to make every client of this pool log in as that user."
        ),
    )
    mode = forms.ChoiceField(
        label=_("Pool mode"), choices=PoolMode.choices, initial=PoolMode.TRANSACTION, widget=forms.RadioSelect
    )
    size = forms.IntegerField(
        label=_("Pool size"),
        min_value=1,
        help_text=_("Server connections this pool may open; clients beyond them wait in line."),
    )

    def __init__(
        self, *args: Any, cluster: Cluster, pool: ConnectionPool | None = None, **kwargs: Any
    ) -> None:
        if pool is not None:
            kwargs.setdefault(
                "initial",
                {"database": pool.database, "user": pool.user, "mode": pool.mode, "size": pool.size},
            )
        super().__init__(*args, **kwargs)
        self.fields["database"].choices = [(d.name, d.name) for d in cluster.databases.all()]
        self.fields["user"].choices = [("", _("Inbound user (whoever connects)"))] + [
            (u.name, u.name) for u in cluster.users.all()
        ]
        self.fields["size"].widget.attrs.update({"min": 1, "inputmode": "numeric"})

    @property
    def mode_choices(self) -> list[tuple[str, str | Promise, str]]:
        """(value, label, one-line explanation) for the mode radio cards."""
        return [(value, label, str(PoolMode.HELP[value])) for value, label in PoolMode.choices]


def _name_help_text() -> str:
    # Formatted when shown, in the page's language: `_(…) % …` in the class body would format (and
    # translate) once, in English, when the module is imported.
    return gettext(
        "3 to %(max)s letters, digits, “_”, “.” or “-”. Clients connect with it as the database name; "
        "it cannot be changed later."
    ) % {"max": POOL_NAME_MAX}


_name_help = lazy(_name_help_text, str)


class CreatePoolForm(PoolForm):
    name = forms.CharField(
        label=_("Pool name"),
        max_length=NAME_INPUT_MAX,
        strip=False,
        help_text=_name_help(),
    )

    field_order = ("name", "database", "user", "mode", "size")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["name"].widget.attrs.update({"autocomplete": "off", "spellcheck": "false"})

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"]
        try:
            return validate_pool_name(name)
        except InvalidPoolName as exc:
            raise forms.ValidationError(str(exc)) from None
