"""The German catalogue's check, run by `make test` before pytest (issue 18, item 4).

Fails (exit 1, each finding on its own line) when
  - a string marked for translation in the code or templates has no German translation in
    locale/de/LC_MESSAGES/django.po, or its translation is fuzzy (the extraction runs on a copy of
    the tree, so the check changes no file);
  - a template holds user-visible text that is not marked: text between tags, or a title,
    aria-label, placeholder, alt or data-label* attribute, outside {% translate %} and
    {% blocktranslate %};
  - Python code hands a page or an event text that is not marked, or that is translated too early
    (``python_findings``): a plain string (or f-string) given to ``messages.*``, ``mark_error``,
    ``ValidationError`` or a form's ``add_error``, ``label=`` / ``help_text=`` in a form, ``help=``
    / ``label=`` in a ``lib`` table; and anything but a Message (or a coded error) given to
    ``log_event`` as text, since an event is read later in the reader's language, never in the
    language of the process that logged it.

    python scripts/i18n_check.py [--templates-only | --catalogue-only | --python-only]

Text that is the same in every language (product names, units, code) is listed in SAME_EVERYWHERE.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "panel.settings")
CATALOGUE = Path("locale/de/LC_MESSAGES/django.po")
SOURCES = ("manage.py", "panel", "benchmarks", "templates", "locale")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.mo", "tests", "vendor")

# Words a page shows the same in English and German: names, units, symbols, code.
SAME_EVERYWHERE = {
    "pgpanel", "PostgreSQL", "PgBouncer", "pgbench", "sysbench", "TPS", "UTC", "SQL", "API", "CSV",
    "JSON", "TLS", "SSL", "CIDR", "IPv4", "IPv6", "IP", "RAM", "vCPU", "vCPUs", "CPU", "ms", "s", "GB",
    "MB", "kB", "KB", "TB", "B", "OK", "ID", "URL", "URI", "p50", "p95", "p99", "doadmin", "defaultdb",
    "sslmode", "require", "psql", "HTMX", "Chart.js", "Swagger", "UI", "min", "max", "h", "d",
}  # fmt: skip
VISIBLE_ATTRIBUTES = re.compile(
    r"""\b(title|aria-label|placeholder|alt|data-label[\w-]*|data-confirm[\w-]*)\s*=\s*"([^"]*)\"""", re.I
)
TAG = re.compile(r"<[^>]*>", re.S)
RAW_ELEMENTS = re.compile(r"<(script|style|code|pre|kbd|samp)\b[^>]*>.*?</\1>", re.S | re.I)
WORD = re.compile(r"[A-Za-zÄÖÜäöüß][A-Za-zÄÖÜäöüß'’-]+")


def visible_words(text: str) -> list[str]:
    """Words people read in ``text`` that would need a translation."""
    return [w for w in WORD.findall(text) if w not in SAME_EVERYWHERE and not w.startswith(("http", "www"))]


def template_findings(path: Path) -> list[str]:
    """Unmarked text of one template, as ``path:line: text``.

    Template tags and variables become a placeholder (they are not text), marked regions
    ({% blocktranslate %}, comments, {% verbatim %}) blank lines; what is left is HTML whose text
    between tags and whose visible attributes must hold no word."""
    from django.template.base import Lexer, TokenType

    parts: list[str] = []
    skip_until: str | None = None
    for token in Lexer(path.read_text()).tokenize():
        newlines = "\n" * token.contents.count("\n")
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0] if token.contents else ""
            if skip_until and name == skip_until:
                skip_until = None
            elif not skip_until and name in ("blocktranslate", "blocktrans", "comment", "verbatim"):
                skip_until = {"comment": "endcomment", "verbatim": "endverbatim"}.get(name, "end" + name)
            parts.append("\x00" + newlines)
        elif skip_until or token.token_type != TokenType.TEXT:
            parts.append("\x00" + newlines)
        else:
            parts.append(token.contents)
    html = "".join(parts)
    html = RAW_ELEMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), html)
    findings: list[str] = []

    def report(offset: int, text: str) -> None:
        if visible_words(text):
            line = html.count("\n", 0, offset) + 1
            shown = text.replace("\x00", "…").strip()[:80]
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            findings.append(f"{where}:{line}: unmarked text {shown!r}")

    for tag in TAG.finditer(html):
        for attribute in VISIBLE_ATTRIBUTES.finditer(tag.group(0)):
            report(tag.start() + attribute.start(), attribute.group(2))
    position = 0
    for text in TAG.split(html):
        report(position, text)
        position += len(text)
        match = TAG.match(html, position)
        if match:
            position = match.end()
    return findings


def unmarked_template_text() -> list[str]:
    findings: list[str] = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        findings += template_findings(path)
    return findings


# Python calls whose text argument reaches a page: the call's name, and which argument.
PAGE_TEXT_CALLS = {
    "success": 1, "info": 1, "warning": 1, "error": 1, "debug": 1, "add_message": 2,  # messages.*
    "mark_error": 1, "ValidationError": 0, "add_error": 1,
}  # fmt: skip
# Keyword arguments whose text is shown: in forms (label, help_text), in lib tables (help, label…).
FORM_KEYWORDS = {"label", "help_text", "empty_label"}
TABLE_KEYWORDS = {"help", "label", "title", "description", "help_text"}
# Calls that translate at once, in the language of whatever process runs them.
EAGER_TRANSLATIONS = {"_", "gettext", "ngettext", "pgettext", "npgettext"}


def _plain_text(node: ast.AST) -> str | None:
    """The text of a string literal, f-string or ``"…" % …`` with words to translate; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod | ast.Add):
        return _plain_text(node.left) or _plain_text(node.right)
    else:
        return None
    return text if visible_words(text) else None


def _eager(node: ast.AST) -> bool:
    """``_("…")``, ``ngettext(…) % …``: finished text in the language active when it ran."""
    if isinstance(node, ast.BinOp):
        return _eager(node.left)
    if isinstance(node, ast.IfExp):
        return _eager(node.body) or _eager(node.orelse)
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in EAGER_TRANSLATIONS
    )


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def python_findings(path: Path, source: str | None = None) -> list[str]:
    """Text that reaches a page or an event unmarked, or marked but translated too early, in one
    Python module, as ``path:line: what``."""
    tree = ast.parse(source if source is not None else path.read_text())
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    is_form = path.name == "forms.py" or path.parent.name == "forms"
    is_lib = "lib" in path.parts
    findings: list[str] = []

    def report(node: ast.AST, what: str, text: str) -> None:
        findings.append(f"{where}:{getattr(node, 'lineno', 0)}: {what} {text.strip()[:80]!r}")

    # What each function assigns to a name, so that ``message = _("…")`` then
    # ``log_event(cluster, kind, message)`` is seen too.
    assigned: dict[int, list[ast.AST]] = {}
    for function in ast.walk(tree):  # outer functions first: an inner one's calls end up its own
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            assignments = [
                node
                for node in ast.walk(function)
                if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and node.value
            ]
            for inner in ast.walk(function):
                if isinstance(inner, ast.Call):
                    assigned[id(inner)] = assignments

    def too_early(call: ast.Call, text: ast.AST) -> bool:
        if _plain_text(text) or _eager(text):
            return True
        if isinstance(text, ast.Attribute) and text.attr in {"error_message", "message"}:
            return True  # a row's or a refusal's text, rendered already
        if not isinstance(text, ast.Name):
            return False
        for assignment in assigned.get(id(call), []):
            targets = assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]
            if any(isinstance(t, ast.Name) and t.id == text.id for t in targets):
                value = assignment.value
                if (
                    _plain_text(value)
                    or _eager(value)
                    or (isinstance(value, ast.BinOp) and _eager(value.right))
                ):
                    return True
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name == "log_event" and len(node.args) > 2:
                if too_early(node, node.args[2]):
                    report(node, "event text not kept as a Message", ast.unparse(node.args[2]))
            elif name in PAGE_TEXT_CALLS and len(node.args) > PAGE_TEXT_CALLS[name]:
                is_messages = name not in {"success", "info", "warning", "error", "debug", "add_message"} or (
                    isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "messages"
                )
                text = _plain_text(node.args[PAGE_TEXT_CALLS[name]])
                if is_messages and text:
                    report(node, f"unmarked text given to {name}", text)
            keywords = (FORM_KEYWORDS if is_form else set()) | (TABLE_KEYWORDS if is_lib else set())
            for keyword in node.keywords:
                text = _plain_text(keyword.value) if keyword.arg in keywords else None
                if text:
                    report(keyword.value, f"unmarked {keyword.arg}=", text)
        elif isinstance(node, ast.Dict) and is_lib:
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in TABLE_KEYWORDS:
                    text = _plain_text(value)
                    if text:
                        report(value, f"unmarked {key.value!r} in a table", text)
    return findings


def unmarked_python_text() -> list[str]:
    findings: list[str] = []
    for top in ("panel", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = set(path.relative_to(ROOT).parts)
            # Tests, migrations and the command line (English for operators) are not pages.
            if parts & {"tests", "migrations", "management"}:
                continue
            findings += python_findings(path)
    return findings


def parse_po(path: Path) -> list[dict]:
    """Entries of a .po file: msgid, msgid_plural, msgstr list, flags (enough for this check)."""
    entries: list[dict] = []
    entry: dict = {}
    field = ""

    def flush() -> None:
        if entry.get("msgid") is not None:
            entries.append(dict(entry))
        entry.clear()

    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line:
            flush()
            field = ""
            continue
        if line.startswith("#,"):
            if entry.get("msgid") is not None:
                flush()
            entry.setdefault("flags", set()).update(f.strip() for f in line[2:].split(","))
        elif line.startswith("#"):
            continue
        elif line.startswith(("msgid ", "msgid_plural ", "msgstr ", "msgstr[", "msgctxt ")):
            keyword, _, rest = line.partition(" ")
            if keyword == "msgid" and entry.get("msgid") is not None and "msgstr" in entry:
                flush()
            field = keyword
            value = _unquote(rest)
            if keyword.startswith("msgstr"):
                entry.setdefault("msgstr", []).append(value)
            else:
                entry[keyword] = value
        elif line.startswith('"'):
            value = _unquote(line)
            if field.startswith("msgstr"):
                entry["msgstr"][-1] += value
            elif field:
                entry[field] = entry.get(field, "") + value
    flush()
    return [e for e in entries if e.get("msgid")]  # the header has an empty msgid


def _unquote(text: str) -> str:
    return text.strip()[1:-1].encode().decode("unicode_escape").encode("latin-1").decode("utf-8")


def catalogue_findings() -> list[str]:
    """Marked strings without a German translation, or fuzzy ones, after a fresh extraction."""
    with tempfile.TemporaryDirectory(prefix="i18n-check-") as tmp:
        copy = Path(tmp)
        for name in SOURCES:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, copy / name, ignore=IGNORED)
            elif source.exists():
                shutil.copy2(source, copy / name)
        # Static scripts hold no marked strings (their labels come from the templates).
        subprocess.run(
            [
                sys.executable,
                "manage.py",
                "makemessages",
                "-l",
                "de",
                "--no-obsolete",
                "--add-location",
                "file",
            ],
            cwd=copy,
            check=True,
            capture_output=True,
        )
        entries = parse_po(copy / CATALOGUE)
    findings = []
    for entry in entries:
        msgid = entry["msgid"]
        if "fuzzy" in entry.get("flags", ()):
            findings.append(f"fuzzy: {msgid[:100]!r}")
        elif not all(entry.get("msgstr") or [""]):
            findings.append(f"untranslated: {msgid[:100]!r}")
    return findings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--templates-only", action="store_true")
    only.add_argument("--catalogue-only", action="store_true")
    only.add_argument("--python-only", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()
    findings: list[str] = []
    if not (args.catalogue_only or args.python_only):
        findings += unmarked_template_text()
    if not (args.templates_only or args.catalogue_only):
        findings += unmarked_python_text()
    if not (args.templates_only or args.python_only):
        findings += catalogue_findings()
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"i18n check: {len(findings)} finding(s); see docs/glossary-de.md for the vocabulary.",
            file=sys.stderr,
        )
        return 1
    print(
        "i18n check: every marked string has a German translation, none fuzzy; no unmarked template "
        "text; no unmarked or early-translated Python text for pages and events."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
