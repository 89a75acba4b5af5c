"""The base of every form of the panel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms


class PanelForm(forms.Form):
    """A form whose inputs carry Bootstrap's classes."""

    if TYPE_CHECKING:
        # For the type checker: the forms set ``choices`` on their choice fields by name, which
        # django-stubs' ``dict[str, Field]`` does not allow; and Django's clean() returns
        # cleaned_data, where the stubs allow None for a subclass that returns nothing.
        fields: dict[str, Any]

        def clean(self) -> dict[str, Any]: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            widget = field.widget
            if isinstance(widget, forms.RadioSelect):
                continue
            css = "form-select" if isinstance(widget, forms.Select) else "form-control"
            widget.attrs.setdefault("class", css)
