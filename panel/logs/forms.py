"""Forms of the Logs tab: the filter (source, level, search) and the slow-query threshold."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from panel.clusters.lib import tunables
from panel.core.forms import PanelForm
from panel.logs import services

SLOW_QUERY_SETTING = "log_min_duration_statement"
MAX_SEARCH = 200


class LogFilterForm(PanelForm):
    """What the tab shows: one source, a level (any when blank), a search text."""

    source = forms.ChoiceField(label=_("Source"), choices=list(services.SOURCES.items()), required=False)
    level = forms.ChoiceField(label=_("Level"), required=False)
    q = forms.CharField(label=_("Search"), max_length=MAX_SEARCH, required=False, strip=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        source = self.data.get("source") if self.data.get("source") in services.SOURCES else services.POSTGRES
        levels = services.LEVELS[cast(str, source)]  # one of SOURCES
        self.fields["level"].choices = [("", _("All levels")), *[(level, level) for level in levels]]

    def filters(self) -> dict[str, str]:
        """source, level and search, with the defaults for what is missing or invalid."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        # A level the source does not have (PANIC after switching to PgBouncer) is dropped, as
        # any other invalid value: the other filters still hold.
        source = data.get("source") or services.POSTGRES
        return {"source": source, "level": data.get("level") or "", "search": data.get("q") or ""}


class SlowQueryForm(PanelForm):
    """``log_min_duration_statement`` alone, checked by the same rules as the Configuration card."""

    log_min_duration_statement = forms.IntegerField(
        label=_("Log statements slower than (ms)"),
        help_text=_("-1 turns it off; 0 logs every statement."),
    )

    def clean_log_min_duration_statement(self) -> int:
        value = self.cleaned_data[SLOW_QUERY_SETTING]
        try:
            tunables.validate({SLOW_QUERY_SETTING: value})
        except tunables.InvalidSettings as exc:
            # A Message renders in the active language, like a lazy string.
            raise forms.ValidationError(cast(str, exc.problems.get(SLOW_QUERY_SETTING, str(exc)))) from None
        return int(value)
