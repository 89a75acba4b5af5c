"""ARCHITECTURE.md lists what the code has: every app (a package with an ``apps.py``) and every
service module of each app (its ``services/`` package, or its one ``services.py``) and of each of
its rooms (``panel/clusters/standbys/services/``), and nothing that is gone (issue 40). No database: it reads the page and the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("panel", "benchmarks")
APPS_HEADING = "## The apps"
SERVICES_HEADING = "## Each app's service modules"
BULLET = re.compile(r"^- `([\w.]+)`", re.MULTILINE)
APP_HEADING = re.compile(r"^### `([\w.]+)`\s*$", re.MULTILINE)


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of the same level."""
    start = text.index(heading + "\n") + len(heading)
    following = re.search(r"^## ", text[start:], re.MULTILINE)
    return text[start : start + following.start()] if following else text[start:]


def doc_apps(text: str) -> set[str]:
    return set(BULLET.findall(_section(text, APPS_HEADING)))


def doc_services(text: str) -> dict[str, set[str]]:
    """Each ``### `app``` heading of the services section with its bullets' module names."""
    section = _section(text, SERVICES_HEADING)
    parts = APP_HEADING.split(section)  # [before, app, body, app, body, …]
    services: dict[str, set[str]] = {}
    for app, body in zip(parts[1::2], parts[2::2], strict=True):
        assert app not in services, f"ARCHITECTURE.md lists {app}'s services twice"
        services[app] = set(BULLET.findall(body))
    return services


def code_apps(root: Path = ROOT) -> set[str]:
    return {
        ".".join(path.parent.relative_to(root).parts)
        for package in PACKAGES
        for path in (root / package).glob("**/apps.py")
        if "tests" not in path.parts
    }


def code_services(root: Path = ROOT) -> dict[str, set[str]]:
    services: dict[str, set[str]] = {}
    for app in code_apps(root):
        folder = root.joinpath(*app.split("."))
        if (folder / "services").is_dir():
            services[app] = {p.stem for p in (folder / "services").glob("*.py") if p.stem != "__init__"}
        elif (folder / "services.py").is_file():
            services[app] = {"services"}
        # A room of an app (clusters' standbys and replicas): a package with services/ of its own.
        for room in sorted(folder.glob("*/services")):
            if room.is_dir() and room.parent.name not in {"tests", "services"}:
                name = f"{app}.{room.parent.name}"
                services[name] = {p.stem for p in room.glob("*.py") if p.stem != "__init__"}
    return services


def differences(text: str, root: Path = ROOT) -> list[str]:
    """What the page and the code disagree on, in words; empty when they agree."""
    found = []
    apps_doc, apps_code = doc_apps(text), code_apps(root)
    found += [f"app {a} is not listed under '{APPS_HEADING}'" for a in sorted(apps_code - apps_doc)]
    found += [f"app {a} is listed under '{APPS_HEADING}' but gone" for a in sorted(apps_doc - apps_code)]
    services_doc, services_code = doc_services(text), code_services(root)
    for app in sorted(services_code.keys() | services_doc.keys()):
        listed, present = services_doc.get(app), services_code.get(app)
        if listed is None:
            found.append(f"{app} has service modules but no '### `{app}`' list")
            continue
        if present is None:
            found.append(f"'### `{app}`' lists services of an app that has none or is gone")
            continue
        found += [f"{app}.services.{m} is not listed" for m in sorted(present - listed)]
        found += [f"{app}.services.{m} is listed but gone" for m in sorted(listed - present)]
    return found


def test_the_page_lists_every_app_and_service_module_and_nothing_gone() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert differences(text) == []


def test_the_lists_are_not_empty() -> None:
    """A parser that found nothing would agree with nothing: the page's lists are read for real."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    assert len(doc_apps(text)) >= 12
    listed = doc_services(text)
    assert sum(len(v) for k, v in listed.items() if k.startswith("panel.clusters")) >= 30
    assert {"panel.clusters.standbys", "panel.clusters.replicas"} <= listed.keys()


def test_a_new_module_a_gone_module_and_a_new_app_are_found(tmp_path: Path) -> None:
    text = """## The apps

- `panel.pools`: pools.
- `panel.gone`: an app that was removed.

## Each app's service modules

### `panel.pools`

- `actions`: create, change, delete.
- `removed`: a module that is gone.
"""
    (tmp_path / "panel/pools/services").mkdir(parents=True)
    (tmp_path / "panel/pools/apps.py").write_text("")
    for name in ("__init__", "actions", "dummy"):
        (tmp_path / f"panel/pools/services/{name}.py").write_text("")
    (tmp_path / "panel/pools/annex/services").mkdir(parents=True)
    (tmp_path / "panel/pools/annex/services/moved.py").write_text("")
    (tmp_path / "panel/newapp").mkdir()
    (tmp_path / "panel/newapp/apps.py").write_text("")
    (tmp_path / "panel/newapp/services.py").write_text("")
    assert differences(text, tmp_path) == [
        "app panel.newapp is not listed under '## The apps'",
        "app panel.gone is listed under '## The apps' but gone",
        "panel.newapp has service modules but no '### `panel.newapp`' list",
        "panel.pools.services.dummy is not listed",
        "panel.pools.services.removed is listed but gone",
        "panel.pools.annex has service modules but no '### `panel.pools.annex`' list",
    ]
