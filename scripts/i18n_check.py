"""The German catalogue's check, run by `make test` before pytest (issue 18, item 4).

Fails (exit 1, each finding on its own line) when
  - a string marked for translation in the code or templates has no German translation in
    locale/de/LC_MESSAGES/django.po, or its translation is fuzzy (the extraction runs on a copy of
    the tree, so the check changes no file);
  - a template holds user-visible text that is not marked: text between tags, or a title,
    aria-label, placeholder, alt or data-label* attribute, outside {% translate %} and
    {% blocktranslate %}.

    python scripts/i18n_check.py [--templates-only | --catalogue-only]

Text that is the same in every language (product names, units, code) is listed in SAME_EVERYWHERE.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    import django

    django.setup()
    findings: list[str] = []
    if not args.catalogue_only:
        findings += unmarked_template_text()
    if not args.templates_only:
        findings += catalogue_findings()
    for finding in findings:
        print(finding)
    if findings:
        print(
            f"i18n check: {len(findings)} finding(s); see docs/glossary-de.md for the vocabulary.",
            file=sys.stderr,
        )
        return 1
    print("i18n check: every marked string has a German translation, none fuzzy; no unmarked template text.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
