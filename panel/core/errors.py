"""The one exception a service raises for the user to read, and how its words reach the user.

A refusal carries a stable ``code`` (``pool.name_taken``), the form ``field`` it belongs to, and its
message as an English template with its parameters (``N_("A pool named “%(name)s” already
exists.")``, ``{"name": name}``). The message is rendered when an edge reads it (the form, the
page, the API, the command line), in the language active there: a refusal raised in the node
agent, whose language is English, still reaches a German page in German. Nothing reads the words
to decide anything: the code says what kind of refusal it is.

This module imports no Django (``lib`` modules raise these errors too); the panel's app config
installs Django's ``gettext`` as the translator at start-up (``set_translator``).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from typing import Any


def N_(message: str) -> str:  # noqa: N802  (the gettext convention's name)
    """Marks ``message`` for the catalogue (makemessages knows ``N_``); translated when rendered."""
    return message


class Term(str):
    """A message parameter that is itself a word to translate (``Term(N_("space"))``): rendered in
    the active language with the message around it. ``context`` tells apart one English word with
    two meanings (``C_("quota", "space")``: storage space, not the character)."""

    context: str | None = None


def C_(context: str, message: str) -> Term:  # noqa: N802  (makemessages knows C_ as pgettext)
    """A word marked for the catalogue with its context, translated when rendered."""
    term = Term(message)
    term.context = context
    return term


class Count(int):
    """A message parameter that is a quantity: written with the language's digit grouping
    (10,000 / 10.000), unlike a port or an id."""


class When(dt.datetime):
    """A message parameter that is a moment: written in the language's date and time format
    (2026-11-24 14:03:00 / 24.11.2026 14:03:00), never as ISO text inside a German sentence."""

    @classmethod
    def of(cls, moment: dt.datetime) -> When:
        return cls.fromisoformat(moment.isoformat())


# ``%(s).1f`` or ``%(t)g`` in a template: the number is written with the language's decimal mark
# (2,5 s).
_DECIMAL_FIELD = re.compile(r"%\((\w+)\)(?:\.(\d))?([fg])")


def _untranslated(message: str) -> str:
    return message


def _untranslated_in(context: str, message: str) -> str:
    return message


_translate: Callable[[str], str] = _untranslated
_translate_in: Callable[[str, str], str] = _untranslated_in
_group: Callable[[int], str] = "{:,}".format
_decimal: Callable[[float, int], str] = lambda value, digits: f"{value:.{digits}f}"  # noqa: E731
_moment: Callable[[dt.datetime], str] = lambda moment: f"{moment:%Y-%m-%d %H:%M:%S}"  # noqa: E731


def set_translator(
    translate: Callable[[str], str],
    translate_in: Callable[[str, str], str],
    group: Callable[[int], str] | None = None,
    decimal: Callable[[float, int], str] | None = None,
    moment: Callable[[dt.datetime], str] | None = None,
) -> None:
    """Install the functions that look a template up in the catalogue (Django's gettext and
    pgettext) and that write a Count, a decimal number and a When in the active language."""
    global _translate, _translate_in, _group, _decimal, _moment
    _translate, _translate_in = translate, translate_in
    _group = group or _group
    _decimal = decimal or _decimal
    _moment = moment or _moment


def render(template: str, params: Mapping[str, Any] | None) -> str:
    """``template`` in the active language, with ``params`` put in; a parameter that is itself a
    template marked for translation (a lazy label) is rendered too."""
    text = _translate(template)
    if params is None:
        return text
    values = {key: _param(value) for key, value in params.items()}

    def decimal(match: re.Match[str]) -> str:
        key, digits, kind = match.group(1), match.group(2), match.group(3)
        value = values.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return match.group(0)
        if kind == "g":  # as %g writes it (no trailing zeros), with the language's decimal mark
            shown = f"{value:g}"
            if "e" in shown:
                return match.group(0)
            digits = str(len(shown.partition(".")[2]))
        digits = digits or "6"  # %f's own default
        values[f"{key}.{digits}{kind}"] = _decimal(round(float(value), int(digits)), int(digits))
        return f"%({key}.{digits}{kind})s"

    return _DECIMAL_FIELD.sub(decimal, text) % values


def words(value: Any) -> str:
    """Any message part in the active language: a Term or a Message rendered, text as it is."""
    return str(_param(value))


def _param(value: Any) -> Any:
    if isinstance(value, Term):
        return _translate_in(value.context, str(value)) if value.context else _translate(str(value))
    if isinstance(value, Count):
        return _group(int(value))
    if isinstance(value, When):
        return _moment(value)
    # A lazy label (a model's choice, a gettext_lazy text) or a Message becomes its words in the
    # active language.
    return value if isinstance(value, int | float | str) else str(value)


class Message:
    """A sentence for a person that a ``lib`` function returns (a problem of a form's value, a
    warning): its template, parameters and code, put into words when ``str()`` is called, in the
    language active then. Equal to the string it renders to, so code and tests may compare."""

    __slots__ = ("code", "params", "template")

    def __init__(self, template: str, code: str | None = None, **params: Any) -> None:
        self.template = template
        self.code = code
        self.params = params

    def __str__(self) -> str:
        return render(self.template, self.params)

    def __repr__(self) -> str:
        return f"Message({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Message):
            return (self.template, self.params) == (other.template, other.params)
        return isinstance(other, str) and str(self) == other

    def __hash__(self) -> int:
        return hash(self.template)

    def __contains__(self, text: str) -> bool:
        return text in str(self)


def params_to_wire(params: Mapping[str, Any]) -> dict[str, Any]:
    """Message parameters as JSON, keeping what is rendered where it is read: a Term stays a word
    to translate, a Message a template with its own parameters; anything else its text here."""
    return {key: _to_wire(value) for key, value in params.items()}


def _to_wire(value: Any) -> Any:
    if isinstance(value, Term):
        return {"$term": str(value), "context": value.context}
    if isinstance(value, Message):
        return {"$message": value.template, "code": value.code, "params": params_to_wire(value.params)}
    if isinstance(value, Count):
        return {"$count": int(value)}
    if isinstance(value, When):
        return {"$when": value.isoformat()}
    return value if isinstance(value, int | float | str) or value is None else str(value)


def message_to_json(message: Message | str) -> dict[str, Any] | str:
    """A Message kept in a JSON column (a run's warnings): rendered when the page is read."""
    return _to_wire(message) if isinstance(message, Message) else message


def message_from_json(value: Any) -> Message | str:
    """``message_to_json``'s reverse; a plain string (rows from before) stays as it is."""
    return _from_wire(value) if isinstance(value, dict) else str(value)


def message_to_text(message: Message) -> str:
    """A Message kept in a text column a page shows (a cluster's last error): JSON, rendered in
    the reader's language by ``shown_text``."""
    return json.dumps(_to_wire(message), ensure_ascii=False)


def message_from_text(text: str) -> Message | str:
    """``message_to_text``'s reverse; other text (rows from before) stays as it is."""
    if not text.startswith('{"$message"'):
        return text
    try:
        found = _from_wire(json.loads(text))
    except (ValueError, TypeError, KeyError):
        return text
    return found if isinstance(found, Message) else text


def shown_text(text: str) -> str:
    """A text column's words in the active language: a kept Message rendered, other text as it is."""
    if not text.startswith('{"$message"'):
        return text
    try:
        return str(_from_wire(json.loads(text)))
    except (ValueError, TypeError, KeyError):
        return text


def params_from_wire(wire: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _from_wire(value) for key, value in wire.items()}


def _from_wire(value: Any) -> Any:
    if isinstance(value, dict) and "$term" in value:
        return C_(value["context"], value["$term"]) if value.get("context") else Term(value["$term"])
    if isinstance(value, dict) and "$count" in value:
        return Count(value["$count"])
    if isinstance(value, dict) and "$when" in value:
        return When.fromisoformat(value["$when"])
    if isinstance(value, dict) and "$message" in value:
        return Message(value["$message"], value.get("code"), **params_from_wire(value["params"]))
    return value


class CodedError(Exception):
    """A refusal with a stable code, a field, and a message rendered when read (see the module)."""

    def __init__(
        self,
        message: str,
        field: str | None = None,
        code: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.template = message
        self.params = dict(params) if params is not None else None
        self.field = field
        self.code = code

    @property
    def message(self) -> str:
        if self.params is None:
            # A message made before it was raised (already in the caller's language, or a text
            # that has no translation such as a server's own error).
            return _translate(self.template) if self.code else self.template
        return render(self.template, self.params)

    def __str__(self) -> str:
        return self.message

    def as_message(self) -> Message | str:
        """The message to keep and render later in the reader's language: a Message when it has a
        template from the catalogue, else its text as it is (a server's own words)."""
        if self.params is not None:
            return Message(self.template, self.code, **self.params)
        return Message(self.template, self.code) if self.code else self.template


class ServiceError(CodedError):
    """A refusal or failure to show where the user acted; ``field`` names the form field and
    ``code`` (stable, e.g. ``pool.name_taken``) says what kind of refusal it is, so an edge (the
    API's error id and status, a test) never has to read the message."""

    @classmethod
    def joined(
        cls, messages: list[Message], field: str | None = None, code: str | None = None, sep: str = " "
    ) -> ServiceError:
        """One refusal of several problems (a form's values), their sentences side by side; its
        code is the first problem's unless given."""
        template = sep.join(f"%(p{index})s" for index in range(len(messages)))
        params = {f"p{index}": message for index, message in enumerate(messages)}
        return cls(template, field, code or messages[0].code, params)

    @classmethod
    def because(cls, sentence: str, code: str, reason: object) -> ServiceError:
        """A failure whose sentence ends in what went wrong beneath (``%(reason)s``: the OS's,
        an engine's or the server's own words)."""
        return cls(sentence, code=code, params={"reason": reason})

    @classmethod
    def of(cls, error: CodedError, field: str | None = None) -> ServiceError:
        """A lib's refusal as the service's, on ``field`` (or the lib's own)."""
        return cls(error.template, field or error.field, error.code, error.params)
