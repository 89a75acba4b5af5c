"""Which PostgreSQL versions are installed: each build of ``postgres`` is asked its version once."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from panel.clusters.engine import postgres

INSTALLED = postgres.installed_versions()
pytestmark = pytest.mark.skipif(not INSTALLED, reason="no PostgreSQL binaries")


def test_a_build_is_asked_its_version_once_and_again_when_it_changes(settings, tmp_path, monkeypatch):
    version, real_bindir = next(iter(INSTALLED.items()))
    shutil.copy2(real_bindir / "postgres", tmp_path / "postgres")  # a build of its own: a new stamp
    for program in ("initdb", "pg_ctl"):
        (tmp_path / program).symlink_to(real_bindir / program)
    settings.PANEL_PG_BINDIR = str(tmp_path)
    spawned: list[list[str]] = []
    real_run = subprocess.run

    def spy(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        spawned.append(list(args))
        return real_run(args, **kwargs)

    monkeypatch.setattr(postgres.subprocess, "run", spy)
    asked = [str(tmp_path / "postgres"), "--version"]

    assert postgres.installed_versions() == {version: Path(tmp_path)}
    assert postgres.bindir_for(version) == Path(tmp_path)
    assert spawned == [asked]

    stat = (tmp_path / "postgres").stat()
    os.utime(tmp_path / "postgres", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert postgres.installed_versions() == {version: Path(tmp_path)}
    assert spawned == [asked, asked]


def test_a_failed_answer_is_not_remembered(settings, tmp_path):
    version, real_bindir = next(iter(INSTALLED.items()))
    for program in ("initdb", "pg_ctl"):
        (tmp_path / program).symlink_to(real_bindir / program)
    (tmp_path / "postgres").write_bytes(b"")
    (tmp_path / "postgres").chmod(0o755)
    settings.PANEL_PG_BINDIR = str(tmp_path)
    assert postgres.installed_versions() == {}

    # The same stamp (path, inode, mtime) now answers: the binary is copied over in place.
    stat = (tmp_path / "postgres").stat()
    with open(tmp_path / "postgres", "r+b") as fh:
        fh.write((real_bindir / "postgres").read_bytes())
    os.utime(tmp_path / "postgres", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (tmp_path / "postgres").stat().st_ino == stat.st_ino
    assert postgres.installed_versions() == {version: Path(tmp_path)}


def test_pg_config_is_asked_once_for_the_programs_it_chooses_from(settings, tmp_path, monkeypatch):
    """Debian's pg_config is a wrapper that runs the newest server's own: its answer is kept until
    it, or the set of programs it picks from, changes (asked each time, it ran four programs per
    pg_ctl call)."""
    version, real_bindir = next(iter(INSTALLED.items()))
    settings.PANEL_PG_BINDIR = ""
    calls = tmp_path / "calls"
    wrapper = tmp_path / "bin" / "pg_config"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\necho asked >> {calls}\necho {real_bindir}\n")
    wrapper.chmod(0o755)
    servers = tmp_path / "lib"
    (servers / "15" / "bin").mkdir(parents=True)
    (servers / "15" / "bin" / "pg_config").write_text("")
    monkeypatch.setattr(postgres, "SEARCH_GLOB", str(tmp_path / "none" / "*" / "bin"))
    monkeypatch.setattr(postgres, "DEBIAN_PG_CONFIGS", str(servers / "*" / "bin" / "pg_config"))
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")

    for _ in range(3):
        assert postgres.installed_versions() == {version: real_bindir}
    assert calls.read_text().split() == ["asked"]

    (servers / "16" / "bin").mkdir(parents=True)  # a newer server's development files arrive
    (servers / "16" / "bin" / "pg_config").write_text("")
    assert postgres.installed_versions() == {version: real_bindir}
    assert calls.read_text().split() == ["asked", "asked"]
