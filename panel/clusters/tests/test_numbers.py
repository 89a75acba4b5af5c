"""The one formatter of a page's figures (the ``number`` filter, a builtin of every template)."""

from __future__ import annotations

from django.template import engines
from django.utils import translation


def shown(template: str, **context: object) -> str:
    return engines["django"].from_string(template).render(context)


def test_it_groups_digits_in_english_and_in_german() -> None:
    with translation.override("en"):
        assert (
            shown("{{ v|number:1 }} ms · {{ n|number }}", v=195214.23, n=100344) == "195,214.2 ms · 100,344"
        )
    with translation.override("de"):
        assert (
            shown("{{ v|number:1 }} ms · {{ n|number }}", v=195214.23, n=100344) == "195.214,2 ms · 100.344"
        )


def test_negative_places_drop_the_decimals_of_a_whole_number() -> None:
    with translation.override("de"):
        assert shown("{{ a|number:-2 }} / {{ b|number:-2 }}", a=2.5, b=1500.0) == "2,50 / 1.500"


def test_what_is_not_a_number_is_blank() -> None:
    assert shown("[{{ v|number:1 }}]", v=None) == "[]"
