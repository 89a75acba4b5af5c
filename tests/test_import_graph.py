"""Every module under panel/ and benchmarks/ sits in a layer of a contract in pyproject.toml.

lint-imports checks the layers it is told about; a module in none of them is checked by nothing.
The contracts with containers are exhaustive for their containers, and this test catches what they
cannot: a new app, or a new package no contract names as a container.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
