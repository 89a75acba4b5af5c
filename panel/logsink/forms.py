"""The Logs tab's log-sink card: a new sink (rsyslog or an Elasticsearch/OpenSearch URL)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.core.forms import PanelForm
from panel.logsink.lib import config as sink_config
from panel.logsink.models import SinkType


class SinkForm(PanelForm):
    """The fields of both kinds of sink; ``config()`` keeps those of the chosen type."""

    sink_name = forms.CharField(label=_("Name"), max_length=63)
    sink_type = forms.ChoiceField(label=_("Type"), choices=SinkType.choices)
    server = forms.CharField(label=_("Server"), max_length=253, required=False)
    port = forms.IntegerField(label=_("Port"), min_value=1, max_value=65535, required=False)
    tls = forms.BooleanField(label=_("TLS"), required=False)
    format = forms.ChoiceField(
        label=_("Format"),
        choices=[("rfc5424", "RFC 5424"), ("rfc3164", "RFC 3164"), ("custom", _("Custom"))],
        required=False,
    )
    logline = forms.CharField(label=_("Custom log line"), max_length=1000, required=False)
    url = forms.CharField(label=_("URL"), max_length=2000, required=False)
    index_prefix = forms.CharField(label=_("Index prefix"), max_length=100, required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tls"].widget.attrs["class"] = "form-check-input"

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        if data["sink_type"] == sink_config.RSYSLOG:
            config = {
                "server": data["server"],
                "port": data["port"],
                "tls": data["tls"],
                "format": data["format"] or "rfc5424",
            }
            if config["format"] == "custom":
                config["logline"] = data["logline"]
            return config
        return {"url": data["url"], "index_prefix": data["index_prefix"]}
