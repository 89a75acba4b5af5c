"""Forms of the cluster pages: they check the shape of the input; the services check the rules."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.formats import number_format
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from panel.clusters import services
from panel.clusters.lib import tunables
from panel.clusters.lib.connstr import SSLMODES
from panel.clusters.lib.hosts import InvalidHost, validate_host
from panel.clusters.lib.plans import DEFAULT_PLAN_SLUG, PLANS, Plan
from panel.clusters.services import nodes
from panel.clusters.services.attach import ExternalServer
from panel.core.forms import PanelForm


class CreateClusterForm(PanelForm):
    name = forms.CharField(
        label=_("Cluster name"),
        max_length=63,
        help_text=_("Lowercase letters, digits and hyphens; it starts with a letter."),
    )
    version = forms.ChoiceField(label=_("PostgreSQL version"))
    plan = forms.ChoiceField(
        label=_("Plan"),
        choices=[(plan.slug, plan.slug) for plan in PLANS],
        initial=DEFAULT_PLAN_SLUG,
        widget=forms.RadioSelect,
    )
    num_nodes = forms.TypedChoiceField(
        label=_("Standby nodes"),
        coerce=int,
        required=False,
        # A form without the field (older pages, scripts): one server (the stubs take only a str).
        empty_value=1,  # type: ignore[arg-type]
        choices=[
            (1, _("None: one server")),
            (2, _("One standby (2 members)")),
            (3, _("Two standbys (3 members)")),
        ],
        initial=1,
        help_text=_(
            "Standbys take over automatically when the primary fails (plans of 2 GB or more); each "
            "counts against the node's capacity like the primary."
        ),
    )
    node = forms.ChoiceField(
        label=_("Node"),
        required=False,
        help_text=_(
            "The machine that runs the cluster. Automatic picks the node with the most free capacity."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Offered once there is more than one node; draining ones take no new clusters.
        choices = nodes.node_choices()
        self.fields["node"].choices = [("", _("Automatic (most free capacity)")), *choices]
        self.show_node = len(choices) > 1
        versions = services.available_versions()
        self.fields["version"].choices = [(v, _("PostgreSQL %(v)s") % {"v": v}) for v in versions]
        if versions:
            self.fields["version"].initial = versions[0]
        if not self.is_bound:
            self.fields["name"].initial = services.default_cluster_name()

    @property
    def plans(self) -> tuple[Plan, ...]:
        """The plans with their sizes, for the plan cards."""
        return PLANS


class AttachClusterForm(PanelForm):
    name = forms.CharField(
        label=_("Cluster name"),
        max_length=63,
        help_text=_("How the panel calls this server: lowercase letters, digits and hyphens."),
    )
    host = forms.CharField(label=_("Host"), max_length=255)
    port = forms.IntegerField(label=_("Port"), min_value=1, max_value=65535, initial=5432)
    user = forms.CharField(label=_("Admin user"), max_length=63, initial="postgres")
    password = forms.CharField(label=_("Password"), widget=forms.PasswordInput, strip=False)
    database = forms.CharField(label=_("Database"), max_length=63, initial="postgres")
    sslmode = forms.ChoiceField(
        label=_("SSL mode"), choices=[(mode, mode) for mode in SSLMODES], initial="require"
    )

    def clean_host(self) -> str:
        # Checked here, before anything resolves it: "." or "a..b" once made the resolver raise.
        try:
            return validate_host(self.cleaned_data["host"])
        except InvalidHost as exc:
            raise forms.ValidationError(str(exc)) from None

    def server(self) -> ExternalServer:
        data = self.cleaned_data
        return ExternalServer(
            host=data["host"],
            port=data["port"],
            user=data["user"],
            password=data["password"],
            database=data["database"],
            sslmode=data["sslmode"],
        )


class NameForm(PanelForm):
    """The one field of "add user" and "add database"."""

    name = forms.CharField(label=_("Name"), max_length=63)


class DeleteClusterForm(PanelForm):
    confirm_name = forms.CharField(label=_("Cluster name"), max_length=63, required=False)


class TrustedSourceForm(PanelForm):
    """The one field of "add a trusted source" (the rules are lib.firewall's, applied by the service)."""

    source = forms.CharField(
        label=_("IP address or network"),
        max_length=64,
        widget=forms.TextInput(attrs={"placeholder": "203.0.113.7 or 203.0.113.0/24", "autocomplete": "off"}),
    )


# --- the Settings tab: resize and configuration ---------------------------------------------------


class ResizeForm(PanelForm):
    """Another plan (``size``) or another number of nodes (``num_nodes``): one change a time."""

    size = forms.ChoiceField(
        label=_("New plan"),
        choices=[(plan.slug, plan.slug) for plan in PLANS],
        widget=forms.RadioSelect,
        required=False,
    )
    num_nodes = forms.TypedChoiceField(
        label=_("Nodes"),
        coerce=int,
        required=False,
        empty_value=None,
        widget=forms.Select(attrs={"class": "form-select"}),
        choices=[
            (1, _("None: one server")),
            (2, _("One standby (2 members)")),
            (3, _("Two standbys (3 members)")),
        ],
    )
    restart = forms.BooleanField(
        label=_("I understand that PostgreSQL restarts: clients are disconnected for a few seconds."),
        error_messages={"required": _("Confirm the restart to resize.")},
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("size") and data.get("num_nodes") is None and "size" not in self.errors:
            self.add_error("size", _("Choose a plan."))
        return data


class ConfigForm(PanelForm):
    """One field per setting the owner may change (lib/tunables), its unit and range as help."""

    def __init__(self, *args: Any, current: dict[str, tunables.Value], **kwargs: Any) -> None:
        super().__init__(*args, initial=current, **kwargs)
        for tunable in tunables.TUNABLES:
            self.fields[tunable.name] = self._field(tunable)
            self.fields[tunable.name].widget.attrs.setdefault(
                "class", "form-select" if tunable.kind in {"bool", "choice"} else "form-control"
            )

    @staticmethod
    def _field(tunable: tunables.Tunable) -> forms.Field:
        help_text = gettext("%(help)s Range: %(range)s. Default: %(default)s.") % {
            "help": gettext(tunable.help),
            "range": _range_text(tunable),
            "default": _default_text(tunable),
        }
        label = f"{tunable.name} ({tunable.unit})" if tunable.unit else tunable.name
        if tunable.kind == "int":
            return forms.IntegerField(label=label, help_text=help_text)
        if tunable.kind == "bool":
            return forms.TypedChoiceField(
                label=label,
                help_text=help_text,
                choices=[("True", "true"), ("False", "false")],
                coerce=lambda value: value == "True",
            )
        if tunable.kind == "choice":
            return forms.ChoiceField(
                label=label, help_text=help_text, choices=[(c, c) for c in tunable.choices]
            )
        return forms.CharField(label=label, help_text=help_text, max_length=64)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        # The same rules as the service's, each problem next to its field.
        for name in self.changed_data:
            if name in data:
                try:
                    tunables.validate({name: data[name]})
                except tunables.InvalidSettings as exc:
                    self.add_error(name, str(exc.problems.get(name, exc)))
        return data

    def changes(self) -> dict[str, tunables.Value]:
        """Only what the owner changed: the other settings keep their values (or defaults)."""
        return {name: self.cleaned_data[name] for name in self.changed_data}


class SwitchoverForm(PanelForm):
    """The standby to promote (the services refuse a missing or lagging one)."""

    to = forms.CharField(label=_("New primary"), max_length=32, required=False)

    def set_members(self, standbys: list[str]) -> None:
        """The standbys to offer; ``to`` stays free text so that the service judges any name."""
        self.standbys = standbys


class ReplicaForm(PanelForm):
    """Add a read-only replica: its name and plan (the service checks it is at least the source's)."""

    name = forms.CharField(
        label=_("Replica name"),
        max_length=63,
        help_text=_("Lowercase letters, digits and hyphens; it starts with a letter."),
    )
    plan = forms.ChoiceField(label=_("Plan"), choices=[(plan.slug, plan.slug) for plan in PLANS])


def _range_text(tunable: tunables.Tunable) -> str:
    """A setting's range as the page's language writes it (0 … 604.800.000 ms on a German page)."""
    if tunable.kind == "int":
        assert tunable.minimum is not None and tunable.maximum is not None  # every int setting has both
        text = f"{number_format(tunable.minimum)} … {number_format(tunable.maximum)}"
        return f"{text} {tunable.unit}" if tunable.unit else text
    return gettext(tunable.range_text)


def _default_text(tunable: tunables.Tunable) -> str:
    if tunable.kind == "bool":
        return "true" if tunable.default else "false"  # as the field's choices say it
    return number_format(tunable.default) if tunable.kind == "int" else str(tunable.default)
