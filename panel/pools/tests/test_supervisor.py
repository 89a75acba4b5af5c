"""The PgBouncer supervisor on its own: files with a previous version, restarts, the log, real starts."""

from __future__ import annotations

import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from panel.pools.engine import disk, supervisor
from panel.pools.lib import pgbouncer_ini
from panel.pools.lib.authfile import render_auth_file, scram_sha256_verifier
from panel.pools.lib.pgbouncer_ini import GlobalSettings, PoolSpec, ServerTarget, render

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def files() -> Iterator[disk.BouncerFiles]:
    # Not pytest's tmp_path: the unprivileged user PgBouncer runs as must enter the directory.
    root = Path(tempfile.mkdtemp(prefix="pgb-sup-", dir="/tmp"))
    root.chmod(0o755)
    port = free_port()
    bouncer = disk.BouncerFiles(root / "pgbouncer", root / "run", port)
    disk.prepare_directory(bouncer)
    yield bouncer
    supervisor.stop(bouncer)
    shutil.rmtree(root, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def config(files: disk.BouncerFiles, **changes: object) -> str:
    from panel.core import runas

    runas.make_private_dir(files.socket_dir)
    values: dict[str, object] = {
        "listen_port": files.port,
        "unix_socket_dir": str(files.socket_dir),
        "auth_file": str(files.auth),
        "logfile": str(files.logfile),
        "pidfile": str(files.pidfile),
        "client_tls_key_file": "/nonexistent.key",
        "client_tls_cert_file": "/nonexistent.crt",
        "client_tls_sslmode": "disable",
        "admin_users": ("pgbouncer",),
    }
    values.update(changes)
    target = ServerTarget(str(files.socket_dir), 1)
    return render(GlobalSettings(**values), target, [PoolSpec("pool-a", "db", None, "transaction", 2)])  # type: ignore[arg-type]


AUTH = render_auth_file({"pgbouncer": scram_sha256_verifier("secret")})


def test_install_keeps_the_previous_files_and_restore_puts_them_back(files: disk.BouncerFiles) -> None:
    disk.install(files, "first ini\n", "first auth\n")
    assert not files.previous(files.ini).exists()
    disk.install(files, "second ini\n", "second auth\n")
    assert files.previous(files.ini).read_text() == "first ini\n"
    assert oct(files.ini.stat().st_mode & 0o777) == "0o600"
    assert oct(files.auth.stat().st_mode & 0o777) == "0o600"
    if os.geteuid() == 0:
        assert files.ini.owner() == "postgres"
    assert disk.restore_previous(files)
    assert (files.ini.read_text(), files.auth.read_text()) == ("first ini\n", "first auth\n")


def test_restoring_the_first_configuration_removes_it(files: disk.BouncerFiles) -> None:
    disk.install(files, "first ini\n", "first auth\n")
    assert not disk.restore_previous(files)
    assert not files.ini.exists() and not files.auth.exists()


def test_only_settings_pgbouncer_reads_at_start_need_a_restart(files: disk.BouncerFiles) -> None:
    base = config(files)
    assert not pgbouncer_ini.needs_restart(None, base)
    assert not pgbouncer_ini.needs_restart(base, base.replace("pool_size=2", "pool_size=3"))
    assert not pgbouncer_ini.needs_restart(base, config(files, max_client_conn=10))
    assert pgbouncer_ini.needs_restart(base, config(files, listen_port=files.port + 1))
    assert pgbouncer_ini.needs_restart(base, config(files, unix_socket_dir="/tmp"))


def test_log_problems_keep_configuration_errors_first(files: disk.BouncerFiles) -> None:
    files.logfile.write_text(
        "2026-11-22 09:51:34.100 UTC [1] LOG old line\n"
        "2026-11-22 09:51:34.200 UTC [1] WARNING C-0x55: db/user@1.2.3.4:5 pooler error: no such database\n"
        "2026-11-22 09:51:34.332 UTC [1] LOG RELOAD command issued\n"
        "2026-11-22 09:51:34.332 UTC [1] WARNING config file loading failed\n"
        "2026-11-22 09:51:34.332 UTC [1] ERROR syntax error in configuration (x.ini:3), stopping loading\n"
    )
    since = len("2026-11-22 09:51:34.100 UTC [1] LOG old line\n")
    assert disk.log_problems(files, since) == [
        "2026-11-22 09:51:34.332 UTC [1] ERROR syntax error in configuration (x.ini:3), stopping loading",
        "2026-11-22 09:51:34.332 UTC [1] WARNING config file loading failed",
    ]


def test_a_socket_path_too_long_is_refused() -> None:
    files = disk.BouncerFiles(Path("/tmp"), Path("/tmp/" + "d" * 90), 25061)
    with pytest.raises(supervisor.SupervisorError, match="Choose a shorter PANEL_DATA_DIR"):
        supervisor.check_socket_path(files)


def test_it_starts_and_stops_pgbouncer(files: disk.BouncerFiles) -> None:
    disk.install(files, config(files), AUTH)
    pid = supervisor.start(files, fds_needed=100)
    assert supervisor.running_pid(files) == pid
    assert supervisor.start(files, fds_needed=100) == pid  # already running
    assert psutil.Process(pid).username() == (
        "postgres" if os.geteuid() == 0 else psutil.Process().username()
    )
    assert supervisor.stop(files)
    assert supervisor.running_pid(files) is None
    assert not supervisor.stop(files)


def test_a_broken_file_fails_to_start_with_pgbouncers_words(files: disk.BouncerFiles) -> None:
    disk.install(files, config(files) + "this line is broken\n", AUTH)
    with pytest.raises(supervisor.SupervisorError, match="syntax error in configuration"):
        supervisor.start(files, fds_needed=100)
    assert supervisor.running_pid(files) is None


def test_a_taken_port_fails_to_start_instead_of_serving_the_socket_only(
    files: disk.BouncerFiles,
) -> None:
    disk.install(files, config(files), AUTH)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", files.port))
        squatter.listen()
        with pytest.raises(
            supervisor.SupervisorError, match="cannot listen on 127.0.0.1.*Address already in use"
        ):
            supervisor.start(files, fds_needed=100)
    assert supervisor.running_pid(files) is None


def test_a_stale_pidfile_after_sigkill_does_not_block_a_start(files: disk.BouncerFiles) -> None:
    disk.install(files, config(files), AUTH)
    supervisor.start(files, fds_needed=100)
    supervisor.kill(files)
    assert files.pidfile.exists() and supervisor.running_pid(files) is None
    assert supervisor.start(files, fds_needed=100) == supervisor.running_pid(files)


def test_pgbouncer_gets_the_descriptors_it_needs_above_a_low_soft_limit(
    files: disk.BouncerFiles,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4000:
        pytest.skip(f"the hard descriptor limit ({hard}) is below what the test asks for")
    disk.install(files, config(files), AUTH)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        pid = supervisor.start(files, fds_needed=4000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    limits = Path(f"/proc/{pid}/limits").read_text()
    assert any(line.startswith("Max open files") and " 4000 " in line for line in limits.splitlines()), limits
    assert "kernel file descriptor limit: 4000" in files.logfile.read_text()


def _named_pgbouncer(tmp_path: Path, ini: Path) -> subprocess.Popen[bytes]:
    """A real process the kernel calls "pgbouncer", started on ``ini`` as PgBouncer is."""
    link = tmp_path / "bin" / "pgbouncer"
    link.parent.mkdir(exist_ok=True)
    if not link.exists():
        link.symlink_to(sys.executable)
    return subprocess.Popen([str(link), "-c", "import time; time.sleep(60)", str(ini)])


def _await_exec(proc: subprocess.Popen[bytes], ini: Path) -> None:
    """Until the child has exec'd (before, it is a copy of this test process by name and cmdline)."""
    deadline = time.monotonic() + 30
    while True:
        ps = psutil.Process(proc.pid)
        if ps.name() == "pgbouncer" and str(ini) in ps.cmdline():
            return
        assert time.monotonic() < deadline, (ps.name(), ps.cmdline())
        time.sleep(0.01)


def test_a_stale_pidfile_naming_another_clusters_pgbouncer_is_not_ours(
    files: disk.BouncerFiles, tmp_path: Path
) -> None:
    # This PgBouncer was SIGKILLed; its pid now belongs to another cluster's PgBouncer.
    other = _named_pgbouncer(tmp_path, tmp_path / "other-cluster" / "pgbouncer.ini")
    mine = _named_pgbouncer(tmp_path, files.ini)
    try:
        for proc, ini in ((other, tmp_path / "other-cluster" / "pgbouncer.ini"), (mine, files.ini)):
            _await_exec(proc, ini)
        files.pidfile.write_text(f"{other.pid}\n")
        assert supervisor.running_pid(files) is None
        files.pidfile.write_text(f"{mine.pid}\n")  # beside it: our own is found
        assert supervisor.running_pid(files) == mine.pid
    finally:
        for proc in (other, mine):
            proc.kill()
            proc.wait()
