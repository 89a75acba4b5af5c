"""`make test-pg`: the whole test suite with its metadata database on PostgreSQL (issue 13).

SQLite is the one-machine default that `make test` runs on; nodes that share a panel share one
PostgreSQL `DATABASE_URL`, so the suite must pass there too. This starts a throwaway PostgreSQL
(tests/pgserver.py: initdb on a free loopback port under /tmp, as PANEL_RUN_AS_USER when root),
runs pytest with PANEL_TEST_DATABASE_URL naming it (pytest-django creates and drops the test
database `test_pgpanel`), then stops the server and removes its files, after a failure or a
Ctrl-C too. Arguments go to pytest: `scripts/test_pg.py -x panel/pools`.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.pgserver, also when run from elsewhere

from tests import pgserver  # noqa: E402

DATABASE = "pgpanel"
USER = "pgpanel"
# A server that lives for one run: durability buys nothing, and fsync costs the suite minutes.
SETTINGS = "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"


def main(pytest_args: list[str]) -> int:
    password = secrets.token_hex(16)
    pg_hba = "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
    with pgserver.throwaway_server(
        port=pgserver.free_port_outside(26000, 27999, address="127.0.0.1"),  # clear of the tests' ranges
        listen_addresses="127.0.0.1",
        pg_hba=pg_hba,
        superuser=USER,
        password=password,
        settings=SETTINGS,
        run_as=os.environ.get("PANEL_RUN_AS_USER", "postgres"),
        prefix="pgpanel-metadata-",
    ) as server:
        url = f"postgresql://{USER}:{password}@127.0.0.1:{server.port}/{DATABASE}"
        with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        print(f"==> metadata on a throwaway PostgreSQL {version} at 127.0.0.1:{server.port} ({server.root})")
        sys.stdout.flush()
        env = dict(os.environ, PANEL_TEST_DATABASE_URL=url)
        return run_pytest(pytest_args, env)


def run_pytest(pytest_args: list[str], env: dict[str, str]) -> int:
    """pytest in a child; a Ctrl-C reaches it too (same process group) and we wait for its
    teardown; SIGTERM is passed on as SIGINT, so its fixtures stop what they started."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, interrupt)
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue  # pytest got the same SIGINT: let it finish its teardown, then stop the server


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
