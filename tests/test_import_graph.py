"""The house's shape: every module under panel/ and benchmarks/ sits in a layer of a contract in
pyproject.toml, no import runs in a circle (not even one inside a function), and no module of
panel/, benchmarks/ or scripts/ is over 400 lines.

lint-imports checks the layers it is told about; a module in none of them is checked by nothing.
The contracts with containers are exhaustive for their containers, and this test catches what they
cannot: a new app, or a new package no contract names as a container.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("panel", "benchmarks")
SKIPPED_FOLDERS = {"tests", "migrations", "__pycache__"}


def _layers(contracts: list[dict]) -> dict[str, set[str]]:
    """Every container of a layers contract, with the modules its layers name."""
    layers: dict[str, set[str]] = {}
    for contract in contracts:
        if contract.get("type") != "layers" or not contract.get("containers"):
            continue
        for container in contract["containers"]:
            for layer in contract["layers"]:
                for tail in re.split(r"[:|]", layer):
                    layers.setdefault(container, set()).add(f"{container}.{tail.strip().strip('()')}")
    return layers


def _modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if SKIPPED_FOLDERS & set(relative.parts[:-1]):
                continue
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found.append(".".join(parts))
    return found


def outside(contracts: list[dict], modules: list[str]) -> list[str]:
    layers = _layers(contracts)

    def covered(module: str) -> bool:
        """In a layer of the innermost container holding it: panel.pools' layers, not panel's."""
        if module in PACKAGES or module in layers:
            return True
        holders = [c for c in layers if module.startswith(c + ".")]
        if not holders:
            return False
        inner = max(holders, key=len)
        return any(module == layer or module.startswith(layer + ".") for layer in layers[inner])

    return [module for module in modules if not covered(module)]


def _contracts() -> list[dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return config["tool"]["importlinter"]["contracts"]


def test_every_module_is_in_a_layer() -> None:
    assert outside(_contracts(), _modules()) == []


def test_a_module_no_layer_names_is_reported() -> None:
    modules = [*_modules(), "panel.pools.stray", "panel.newapp.views", "panel.stray"]
    assert outside(_contracts(), modules) == ["panel.pools.stray", "panel.newapp.views", "panel.stray"]


def test_every_app_is_a_container() -> None:
    containers = set(_layers(_contracts()))
    apps = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for path in (ROOT / package).glob("**/apps.py")
    }
    assert apps - containers == set()


def circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in imports.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                other = stack.pop()
                group.append(other)
                if other == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return found


def test_no_import_runs_in_a_circle() -> None:
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    own = {m for m in graph.modules if not SKIPPED_FOLDERS & set(m.split("."))}
    imports = {m: graph.find_modules_directly_imported_by(m) & own for m in own}
    assert circles(imports) == []


def test_a_circle_is_found() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(imports) == [["a", "b", "c"]]


ROOMY = ("panel", "benchmarks", "scripts")
MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for folder in ROOMY
        for path in (ROOT / folder).rglob("*.py")
        if not SKIPPED_FOLDERS & set(path.relative_to(ROOT).parts[:-1])
        and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_every_app_shows_the_others_a_face() -> None:
    """Each app but core (what every app shares) keeps its inner modules behind a "protected"
    contract that only it (and the project's URLs) may pass: a new app without one is found."""
    guarded = {
        importer
        for contract in _contracts()
        if contract.get("type") == "protected"
        for importer in contract["allowed_importers"]
        if any(module.startswith(importer + ".") for module in contract["protected_modules"])
    }
    apps = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for path in (ROOT / package).glob("**/apps.py")
    }
    assert apps - guarded - {"panel.core"} == set()
