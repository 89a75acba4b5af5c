"""The one way a page writes a figure: in the page's language, digits grouped (1,234.5 in English,
1.234,5 in German), so no tab writes ``195214,2`` beside another's ``1.234``. A builtin of the
template engine (settings.TEMPLATES), so every template has it without loading it."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.defaultfilters import floatformat

register = template.Library()


@register.filter
def number(value: Any, places: int | str = 0) -> str:
    """``value`` with ``places`` decimals; negative ``places``: that many, or none for a whole
    number (floatformat's -N). Blank for what is not a number."""
    return floatformat(value, f"{int(places)}g")
