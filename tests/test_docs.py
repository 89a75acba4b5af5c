"""The docs stay true: every file path and `manage.py` command they name exists, and the README's
tour runs as printed (issue 31, item 3)."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command, get_commands, load_command_class

from panel.clusters.models import Cluster

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    ROOT / "ARCHITECTURE.md",
    ROOT / "SECURITY.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
TOP_DIRS = (
    "panel/",
    "benchmarks/",
    "scripts/",
    "tests/",
    "templates/",
    "static/",
    "docker/",
    "docs/",
    "locale/",
)
# A path inside backticks, a markdown link or a code block, starting at one of the repository's folders.
_TOPS = "|".join(re.escape(d) for d in TOP_DIRS)
PATH_RE = re.compile(rf"(?<![\w./<-])((?:{_TOPS})[\w./*{{}},<>-]*)")
COMMAND_RE = re.compile(r"manage\.py ([a-z_]+)\b(?!\.)(?: ([a-z][a-z-]*))?")


def _paths(text: str) -> set[str]:
    found = set()
    for match in PATH_RE.finditer(text):
        path = match.group(1).rstrip(".,:;)")
        if any(mark in path for mark in "<>{}"):  # a placeholder (`<id>`, `{uuid}`): its folder is checked
            path = re.split(r"[<>{}]", path)[0].rsplit("/", 1)[0]
        found.add(path)
    return found


def _exists(path: str) -> bool:
    return any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted(p for p in _paths(doc.read_text()) if not _exists(p))
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def _subcommands(name: str) -> set[str] | None:
    """The subcommands a panel command dispatches (its `do_<name>` methods), or None for a plain one."""
    command = load_command_class(get_commands()[name], name)
    names = {attr[3:].replace("_", "-") for attr in dir(command) if attr.startswith("do_")}
    return names or None


def test_every_manage_py_command_a_doc_names_exists() -> None:
    commands = get_commands()
    wrong = []
    for doc in DOCS:
        for name, sub in COMMAND_RE.findall(doc.read_text()):
            if name not in commands:
                wrong.append(f"{doc.name}: manage.py {name}")
                continue
            subs = _subcommands(name)
            if sub and subs is not None and sub not in subs:
                wrong.append(f"{doc.name}: manage.py {name} {sub}")
    assert not wrong, f"commands the docs name that do not exist: {sorted(set(wrong))}"


def test_the_path_check_finds_a_missing_path() -> None:
    assert _paths("see `panel/clusters/nowhere.py` and `docs/api.md`") == {
        "panel/clusters/nowhere.py",
        "docs/api.md",
    }
    assert not _exists("panel/clusters/nowhere.py") and _exists("docs/api.md")


def _tour_commands() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("The same from the command line", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    return [shlex.split(line)[2:] for line in block.strip().splitlines()]


@pytest.mark.integration
def test_the_readme_tour_runs_as_printed(transactional_db: None) -> None:
    """The tour's commands, in order, as printed; only the runs' 30 s become 3 s."""
    User.objects.create_superuser("admin", "admin@example.com", "admin-password-1")
    commands = _tour_commands()
    assert [c[:2] for c in commands][:3] == [["cluster", "create"], ["cluster", "db-add"], ["bench", "init"]]
    outputs = []
    try:
        for args in commands:
            args = ["3" if a == "30" and args[i - 1] == "--duration" else a for i, a in enumerate(args)]
            out = io.StringIO()
            call_command(*args, stdout=out, stderr=io.StringIO())
            outputs.append(out.getvalue())
        runs = outputs[-1]
        assert runs.count("succeeded") >= 2, runs  # 50 direct, then 150 through test-pool
    finally:
        for cluster in Cluster.objects.filter(name="shop"):
            call_command("cluster", "delete", "shop", "--yes", stdout=io.StringIO())
            assert not Cluster.objects.filter(pk=cluster.pk).exists()
