"""Django's makemessages, two changes: no fuzzy matching (a new message starts empty instead of
borrowing a near-miss translation of another one, which the i18n check would refuse as fuzzy
anyway), and ``N_`` and ``C_`` (panel.core.errors' markers of words translated when shown, C_
with a context) are keywords, so that those words reach the catalogue."""

from __future__ import annotations

from django.core.management.commands import makemessages


class Command(makemessages.Command):
    msgmerge_options = [*makemessages.Command.msgmerge_options, "--no-fuzzy-matching"]
    xgettext_options = [*makemessages.Command.xgettext_options, "--keyword=N_", "--keyword=C_:1c,2"]
