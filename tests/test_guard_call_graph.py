"""The guard's C files (panel/clusters/guard/) keep the house's shape too: calls go one way between
files (pgpanel_guard.c -> the concerns -> name_list.c), no file is over 400 lines, and the build
compiles every file there is.

Parsed simply, as the guard's style (PostgreSQL's) allows: a function is defined where its name
starts a line and its parameters are followed by a body, the return type on the line above
(``static`` there keeps it to its file). A file that names a function another file defines, to
call it or to hand it over as a hook, depends on that file. Comments and literals are blanked
first; headers only declare, so they count for the lines but not for the calls.
"""

from __future__ import annotations

import re
from pathlib import Path

from panel.clusters.engine import guard
from tests.test_import_graph import MAX_LINES, circles

GUARD = Path(guard.SOURCE_DIR)
_LITERALS = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_DEFINED = re.compile(r"^([A-Za-z_]\w*)\(", re.M)
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


def _blank(text: str) -> str:
    """The text with comments and literals replaced by spaces (newlines kept, for the lines)."""
    return _LITERALS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def definitions(code: str) -> tuple[set[str], set[str]]:
    """The functions a file defines: those other files may call, and its static ones."""
    exported: set[str] = set()
    local: set[str] = set()
    for match in _DEFINED.finditer(code):
        depth, end = 1, match.end()
        while depth and end < len(code):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            end += 1
        if not code[end:].lstrip().startswith("{"):
            continue  # a declaration, or a call at column 0
        type_line = code[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        (local if type_line.startswith("static") else exported).add(match.group(1))
    return exported, local


def call_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """File -> the files whose functions it names, from C sources by file name."""
    code = {name: _blank(text) for name, text in sources.items() if name.endswith(".c")}
    defined = {name: definitions(text) for name, text in code.items()}
    owner = {function: name for name, (exported, _) in defined.items() for function in exported}
    graph: dict[str, set[str]] = {}
    for name, text in code.items():
        own = defined[name][0] | defined[name][1]
        named = set(_IDENTIFIER.findall(text)) - own
        graph[name] = {owner[function] for function in named if function in owner} - {name}
    return graph


def _guard_sources() -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(GUARD.glob("*.[ch]"))}


def test_no_call_runs_in_a_circle_between_the_guards_files() -> None:
    assert circles(call_graph(_guard_sources())) == []


def test_calls_go_from_the_entry_point_to_the_concerns_to_the_name_lists() -> None:
    graph = call_graph(_guard_sources())
    assert graph["name_list.c"] == set()
    assert graph["pgpanel_guard.c"] >= {
        "role_guard.c",
        "measure_guard.c",
        "write_stop.c",
        "replication_guard.c",
    }
    assert not any("pgpanel_guard.c" in called for called in graph.values())
    assert {name for name, called in graph.items() if "name_list.c" in called} == {
        "reserved_roles.c",
        "write_stop.c",
        "replication_guard.c",
    }


def test_a_circle_of_calls_between_files_is_found() -> None:
    sources = {
        # parse_list in a comment or a string is no call
        "entry.c": '/* parse_list(x) */\nvoid\n_PG_init(void)\n{\n\tconcern_check("parse_list(");\n}\n',
        "concern.c": (
            "static bool\nhelper(int x)\n{\n\treturn x > 0;\n}\n\n"
            "bool\nconcern_check(const char *x)\n{\n\treturn helper(1) && parse_list(x);\n}\n"
        ),
        # the list parser hands the concern's function over as a hook: a call back all the same
        "lists.c": (
            "static bool\nhelper(int x)\n{\n\treturn x;\n}\n\n"
            "bool\nparse_list(const char *s)\n{\n\tlist_hook = concern_check;\n\treturn helper(1);\n}\n"
        ),
    }
    graph = call_graph(sources)
    assert graph == {"entry.c": {"concern.c"}, "concern.c": {"lists.c"}, "lists.c": {"concern.c"}}
    assert circles(graph) == [["concern.c", "lists.c"]]
    sources["lists.c"] = sources["lists.c"].replace("list_hook = concern_check;", "")
    assert circles(call_graph(sources)) == []


def test_no_guard_file_is_over_400_lines() -> None:
    long = {
        name: lines
        for name, text in _guard_sources().items()
        if (lines := len(text.splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_build_takes_every_file_of_the_guard() -> None:
    """A file left out of guard.SOURCES or the Makefile would be built from a stale copy, or not at all."""
    on_disk = {
        path.name for path in GUARD.iterdir() if path.suffix in (".c", ".h") or path.name == "Makefile"
    }
    assert set(guard.SOURCES) == on_disk
    makefile = (GUARD / "Makefile").read_text().replace("\\\n", " ")
    objects = re.search(r"^OBJS\s*=(.*)$", makefile, re.M)
    assert objects is not None
    assert {name.removesuffix(".o") + ".c" for name in objects.group(1).split()} == {
        name for name in on_disk if name.endswith(".c")
    }
