"""The base of every form of the panel."""

from __future__ import annotations

from typing import Any

from django import forms


class PanelForm(forms.Form):
    """A form whose inputs carry Bootstrap's classes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            widget = field.widget
            if isinstance(widget, forms.RadioSelect):
                continue
            css = "form-select" if isinstance(widget, forms.Select) else "form-control"
            widget.attrs.setdefault("class", css)
