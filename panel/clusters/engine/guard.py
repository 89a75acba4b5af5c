"""The privilege guard: ``pgpanel_guard.so``, built from ``panel/clusters/guard/`` with PGXS for
each PostgreSQL major version the panel runs, and loaded by every cluster it creates through
``shared_preload_libraries`` (see that directory's README for what it refuses).

The build lands in ``PANEL_DATA_DIR/lib/pg<major>/``, is redone only when the source or the
server's headers change (a hash stamp next to the library), runs in a temporary directory and is
moved into place atomically under a file lock, so concurrent workers never load half a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from django.conf import settings

from panel.clusters.engine import postgres
from panel.core.runas import EngineError

SOURCE_DIR = Path(__file__).resolve().parent.parent / "guard"
SOURCES = (
    "Makefile",
    "pgpanel_guard.h",
    "pgpanel_guard.c",
    "role_guard.h",
    "role_guard.c",
    "reserved_roles.c",
    "role_membership.c",
    "server_access_guard.c",
    "measure_guard.c",
    "write_stop.h",
    "write_stop.c",
    "write_stop_executor.c",
    "write_stop_statements.c",
    "write_stop_rewrites.c",
    "write_stop_functions.c",
    "replication_guard.c",
    "subscription_guard.c",
    "name_list.h",
    "name_list.c",
)
LIBRARY = "pgpanel_guard.so"
STAMP = "pgpanel_guard.sha256"
# Predefined roles that reach the operating system; the panel's own roles are added to them.
RESERVED_PREDEFINED_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
# Where make and the compiler are looked for (the panel's own PATH may be a virtualenv's).
BUILD_PATH = "/usr/local/bin:/usr/bin:/bin"
BUILD_TIMEOUT = 180


class GuardBuildError(EngineError):
    """The guard could not be built; the message (for the server log) says what to install or
    shows the compiler. ``tools_missing``: the node lacks the build tools, which an administrator
    installs (a page says so in its own words)."""

    def __init__(self, message: str, *, tools_missing: bool = False) -> None:
        super().__init__(message)
        self.tools_missing = tools_missing


def reserved_roles() -> tuple[str, ...]:
    """The roles only a superuser may grant, revoke, alter or drop."""
    return (*RESERVED_PREDEFINED_ROLES, *settings.PANEL_ROLES)


def lib_root() -> Path:
    return Path(settings.PANEL_DATA_DIR) / "lib"


def _check_version(version: str) -> str:
    if not re.fullmatch(r"\d+", version):
        raise GuardBuildError(f"Not a PostgreSQL major version: {version!r}.")
    return version


def library_path(version: str) -> Path:
    """Where the guard for PostgreSQL ``version`` is (or will be) built."""
    return lib_root() / f"pg{_check_version(version)}" / LIBRARY


def _install_hint(version: str) -> str:
    return (
        f"Install the build tools with `apt-get install postgresql-server-dev-{version} make gcc` "
        "(scripts/bootstrap.sh does this when run as root), then try again."
    )


def pg_config_for(version: str) -> Path:
    """The pg_config of the server version ``version`` (next to its initdb, or Debian's place)."""
    _check_version(version)
    candidates = []
    with suppress(EngineError):  # not installed where the panel looks: try Debian's place
        candidates.append(postgres.bindir_for(version) / "pg_config")
    candidates.append(Path(f"/usr/lib/postgresql/{version}/bin/pg_config"))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise GuardBuildError(
        f"The privilege guard for PostgreSQL {version} cannot be built: pg_config was not found "
        f"(looked for {', '.join(map(str, candidates))}). {_install_hint(version)}",
        tools_missing=True,
    )


def _pg_config(pg_config: Path, *options: str) -> list[str]:
    try:
        result = subprocess.run(
            [str(pg_config), *options],
            capture_output=True,
            text=True,
            timeout=30,
            env=_build_env(),
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise GuardBuildError(f"{pg_config} {' '.join(options)} failed: {exc}") from None
    return result.stdout.splitlines()


def _build_env() -> dict[str, str]:
    return {"PATH": BUILD_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": "/"}


def _digest(pg_config: Path) -> str:
    """What a build depends on: our sources, and which server headers they were compiled against."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    digest.update(str(pg_config).encode() + b"\0")
    digest.update("\n".join(_pg_config(pg_config, "--version")).encode())
    return digest.hexdigest()


def _is_current(target: Path, digest: str) -> bool:
    try:
        return target.is_file() and (target.parent / STAMP).read_text().strip() == digest
    except OSError:
        return False


def _missing_tools(version: str, pg_config: Path) -> list[str]:
    missing = []
    answer = _pg_config(pg_config, "--includedir-server", "--pgxs")
    if len(answer) != 2:
        raise GuardBuildError(f"{pg_config} --includedir-server --pgxs answered {answer!r}.")
    includedir, pgxs = answer
    if not (Path(includedir) / "postgres.h").is_file() or not Path(pgxs).is_file():
        missing.append(f"postgresql-server-dev-{version} (no {Path(includedir) / 'postgres.h'})")
    if shutil.which("make", path=BUILD_PATH) is None:
        missing.append("make")
    compiler = (_pg_config(pg_config, "--cc") or ["gcc"])[0].split()[0]
    if shutil.which(compiler, path=BUILD_PATH) is None:
        missing.append(compiler)
    return missing


def _make_public_dir(path: Path) -> None:
    """Readable and traversable by the users that run PostgreSQL, writable only by the panel:
    whoever could write here could put code into every cluster."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and path.stat().st_uid != 0:
        os.chown(path, 0, 0)
    os.chmod(path, 0o755)


@contextmanager
def _build_lock() -> Iterator[None]:
    root = lib_root()
    _make_public_dir(root)
    fd = os.open(root / ".build.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _publish(source: Path, target: Path, mode: int) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    os.chmod(tmp, mode)
    os.replace(tmp, target)


def _compile(version: str, pg_config: Path, workdir: Path) -> Path:
    for name in SOURCES:
        shutil.copyfile(SOURCE_DIR / name, workdir / name)
    # with_llvm=no: the JIT bitcode is only for installing into PostgreSQL's tree, which we do not.
    args = ["make", "-C", str(workdir), f"PG_CONFIG={pg_config}", "with_llvm=no"]
    try:
        proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=_build_env(),
            cwd=workdir,
            start_new_session=True,
        )
    except OSError as exc:
        raise GuardBuildError(
            f"Could not run make: {exc.strerror}. {_install_hint(version)}", tools_missing=True
        ) from None
    try:
        output, _ = proc.communicate(timeout=BUILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # make and the compilers it started
        proc.communicate()
        raise GuardBuildError(
            f"Building the privilege guard for PostgreSQL {version} did not finish within {BUILD_TIMEOUT} s."
        ) from None
    built = workdir / LIBRARY
    if proc.returncode != 0 or not built.is_file():
        raise GuardBuildError(
            f"Building the privilege guard for PostgreSQL {version} failed (make exited with "
            f"{proc.returncode}):\n" + "\n".join(output.strip().splitlines()[-25:])
        )
    return built


def ensure_built(version: str) -> Path:
    """The guard's library for PostgreSQL ``version``, built first if missing or out of date."""
    target = library_path(version)
    pg_config = pg_config_for(version)
    digest = _digest(pg_config)
    if _is_current(target, digest):
        return target
    with _build_lock():
        if _is_current(target, digest):
            return target  # another worker built it while we waited
        missing = _missing_tools(version, pg_config)
        if missing:
            raise GuardBuildError(
                f"The privilege guard for PostgreSQL {version} cannot be built: missing "
                f"{', '.join(missing)}. {_install_hint(version)}",
                tools_missing=True,
            )
        workdir = Path(tempfile.mkdtemp(prefix=".build-", dir=lib_root()))
        try:
            built = _compile(version, pg_config, workdir)
            _make_public_dir(target.parent)
            _publish(built, target, 0o644)
            stamp = workdir / STAMP
            stamp.write_text(digest + "\n")
            _publish(stamp, target.parent / STAMP, 0o644)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return target


def is_loaded(pid: int) -> bool | None:
    """Whether the process ``pid`` (a postmaster) has the guard mapped; None if unknown."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    return f"/{LIBRARY}" in maps
