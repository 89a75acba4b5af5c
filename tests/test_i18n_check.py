"""The i18n check that `make test` runs (scripts/i18n_check.py): what it finds and what it lets by."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.scripts import load_script

i18n_check = load_script("i18n_check.py")


def findings(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "page.html"
    path.write_text(source)
    return i18n_check.template_findings(path)


@pytest.mark.parametrize(
    "source",
    [
        "<p>Hello world</p>",
        '<div title="Open the pool">{% translate "x" %}</div>',
        '<input placeholder="Search logs">',
        "<td>{{ run.tps }} transactions</td>",
        '<a href="{% url "x" %}">Back to the list</a>',
    ],
)
def test_unmarked_text_is_found(tmp_path: Path, source: str) -> None:
    assert findings(tmp_path, "{% load i18n %}\n" + source), source


@pytest.mark.parametrize(
    "source",
    [
        '<p>{% translate "Hello world" %}</p>',
        "<p>{% blocktranslate with n=3 %}{{ n }} runs to go{% endblocktranslate %}</p>",
        '<a class="btn" href="{% url "x" %}" aria-label="{% translate "Close" %}">×</a>',
        "<td>{{ run.tps }} TPS, {{ ms }} ms</td>",  # units and names are the same in German
        "<code>pgbench -c 10 --select-only</code>",
        "{# a comment in English #}{% comment %}Another one{% endcomment %}",
        '<script type="application/json">{"label": "not text"}</script>',
    ],
)
def test_marked_text_names_and_code_pass(tmp_path: Path, source: str) -> None:
    assert findings(tmp_path, "{% load i18n %}\n" + source) == [], source


def test_the_line_of_a_finding_is_where_the_text_is(tmp_path: Path) -> None:
    [finding] = findings(
        tmp_path, "{% load i18n %}\n<div>\n{% if x %}\n  <p>Left in English</p>\n{% endif %}</div>"
    )
    assert finding.endswith(":4: unmarked text 'Left in English'"), finding


def test_the_catalogue_parser_sees_untranslated_fuzzy_and_plural_entries(tmp_path: Path) -> None:
    po = tmp_path / "django.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Language: de\\n"\n\n'
        'msgid "Pools"\nmsgstr "Verbindungspools"\n\n'
        'msgid "Size"\nmsgstr ""\n\n'
        '#, fuzzy\nmsgid "Latency"\nmsgstr "Latenz"\n\n'
        'msgid "%(n)s run"\nmsgid_plural "%(n)s runs"\nmsgstr[0] "%(n)s Lauf"\nmsgstr[1] ""\n\n'
        'msgid ""\n"Two "\n"lines"\nmsgstr ""\n"Zwei "\n"Zeilen"\n'
    )
    entries = {e["msgid"]: e for e in i18n_check.parse_po(po)}
    assert entries["Pools"]["msgstr"] == ["Verbindungspools"]
    assert entries["Size"]["msgstr"] == [""]
    assert "fuzzy" in entries["Latency"]["flags"]
    assert entries["%(n)s run"]["msgstr"] == ["%(n)s Lauf", ""]
    assert entries["Two lines"]["msgstr"] == ["Zwei Zeilen"]


def test_the_projects_templates_have_no_unmarked_text() -> None:
    assert i18n_check.unmarked_template_text() == []


def python_findings(tmp_path: Path, source: str, name: str = "services.py") -> list[str]:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return i18n_check.python_findings(path)


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("services.py", 'transitions.log_event(cluster, "trusted-sources", "Trusted source added.")'),
        ("services.py", 'transitions.log_event(cluster, "reset", _("Query statistics were reset."))'),
        ("services.py", 'transitions.log_event(cluster, "x", _("Trusted source %(s)s added.") % {"s": s})'),
        (
            "services.py",
            'def f(c):\n    message = _("Sources set.")\n    message += " more"\n    transitions.log_event(c, "x", message)',
        ),
        ("services.py", 'transitions.log_event(cluster, "error", cluster.error_message)'),
        ("services.py", 'transitions.mark_error(cluster, f"Could not delete the cluster: {exc}")'),
        ("views.py", 'messages.success(request, "Pool created.")'),
        ("forms.py", 'raise forms.ValidationError("Choose another name.")'),
        ("forms.py", 'form.add_error("name", "This name is taken.")'),
        ("forms.py", 'name = forms.CharField(label="Cluster name")'),
        ("forms.py", 'name = forms.CharField(label=_("Name"), help_text="Lowercase letters only.")'),
        ("lib/tunables.py", 'Tunable("work_mem", "int", 4, help="Memory a sort may use.")'),
        ("lib/table.py", 'ROWS = {"work_mem": {"help": "Memory a sort may use."}}'),
    ],
)
def test_unmarked_python_text_for_pages_is_found(tmp_path: Path, name: str, source: str) -> None:
    assert python_findings(tmp_path, source, name), source


@pytest.mark.parametrize(
    ("name", "source"),
    [
        (
            "services.py",
            'transitions.log_event(cluster, "x", Message(N_("Trusted source “%(s)s” added."), s=s))',
        ),
        (
            "services.py",
            "transitions.log_event(cluster, 'pooler-error', exc.as_message())",
        ),  # kept as its template
        ("services.py", 'log.warning("resizing %s failed: %s", pk, reason)'),  # the log, not a page
        ("services.py", "transitions.mark_error(cluster, str(message))"),
        ("views.py", 'messages.success(request, _("Pool created."))'),
        ("forms.py", 'name = forms.CharField(label=_("Cluster name"), help_text=_("Lowercase letters."))'),
        ("forms.py", 'ssl = forms.CharField(label="TLS")'),  # the same in every language
        ("lib/tunables.py", 'Tunable("work_mem", "int", 4, help=N_("Memory a sort may use."))'),
        ("services.py", 'Tunable("x", help="Not in a lib table: services hold no such tables.")'),
    ],
)
def test_marked_python_text_passes(tmp_path: Path, name: str, source: str) -> None:
    assert python_findings(tmp_path, source, name) == [], source


def test_the_projects_python_hands_pages_and_events_no_unmarked_text() -> None:
    assert i18n_check.unmarked_python_text() == []
