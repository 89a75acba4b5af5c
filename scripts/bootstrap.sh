#!/usr/bin/env bash
# Install what `make run` / `make test` need on Debian 12, then create or refresh .venv.
#
#   scripts/bootstrap.sh run    PostgreSQL, PgBouncer, Redis
#   scripts/bootstrap.sh test   the same, plus Chromium for the browser tests
#
# Fast when everything is there: apt is skipped entirely, and pip runs only when
# requirements.txt changed since the last install (a checksum kept in .venv).
set -euo pipefail

mode="${1:-run}"
case "$mode" in
run | test) ;;
*)
    echo "usage: $0 run|test" >&2
    exit 2
    ;;
esac

cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV=".venv"
# As root, make run serves the web as an unprivileged user, who must be able to run the venv's
# interpreter: Debian's python3 (DESIGN: Python 3.11 of Debian 12), not one under /root (pyenv).
if [[ "$(id -u)" -eq 0 && "$PYTHON" == python3 && -x /usr/bin/python3 ]]; then
    PYTHON=/usr/bin/python3
fi

# --- system packages -------------------------------------------------------------------------

missing=()
have() { command -v "$1" >/dev/null 2>&1; }

# The programs the panel runs from a PostgreSQL bin directory (engine/postgres.py's
# REQUIRED_PROGRAMS, and pgbench for benchmarks), checked the same way wherever they are.
PG_PROGRAMS=(initdb pg_ctl postgres pgbench)

bindir_complete() {
    local program
    for program in "${PG_PROGRAMS[@]}"; do
        [[ -x "$1/$program" ]] || return 1
    done
}

pg_server_installed() {
    if [[ -n "${PANEL_PG_BINDIR:-}" ]]; then
        # apt cannot mend a directory of one's own choosing: say what is missing there.
        if ! bindir_complete "$PANEL_PG_BINDIR"; then
            echo "PANEL_PG_BINDIR=$PANEL_PG_BINDIR lacks one of: ${PG_PROGRAMS[*]}." >&2
            exit 1
        fi
        return 0
    fi
    local bindir
    for bindir in /usr/lib/postgresql/*/bin; do
        bindir_complete "$bindir" && return 0
    done
    return 1
}

# The privilege guard (panel/clusters/guard) is compiled with PGXS for every server major the
# panel may run: it needs that major's server headers, make and a C compiler. With no server yet,
# postgresql-server-dev-all brings the headers of the major `postgresql` installs.
pg_server_installed || missing+=(postgresql postgresql-server-dev-all)
for bindir in /usr/lib/postgresql/*/bin; do
    bindir_complete "$bindir" || continue
    major="$(basename "$(dirname "$bindir")")"
    [[ -f "/usr/include/postgresql/$major/server/postgres.h" ]] || missing+=("postgresql-server-dev-$major")
done
if [[ -n "${PANEL_PG_BINDIR:-}" ]] && ! {
    [[ -x "$PANEL_PG_BINDIR/pg_config" ]] &&
        [[ -f "$("$PANEL_PG_BINDIR/pg_config" --includedir-server)/postgres.h" ]]
}; then
    echo "PANEL_PG_BINDIR=$PANEL_PG_BINDIR has no pg_config with server headers (needed to build the privilege guard)." >&2
    exit 1
fi
have make || missing+=(make)
have gcc || missing+=(gcc)
have pgbouncer || missing+=(pgbouncer)
# sysbench, the second benchmark engine (Debian's 1.0.20 has the pgsql driver and oltp_* scripts).
have sysbench || missing+=(sysbench)
have redis-server || missing+=(redis-server)
# gettext's msgfmt: `compilemessages` builds the German catalogue on every run and test.
have msgfmt || missing+=(gettext)
# pgBackRest (2.45 in Debian 12) archives every cluster's WAL and takes its backups (panel/backups).
have pgbackrest || missing+=(pgbackrest)
# High availability (clusters of 2-3 members): etcd is Patroni's consensus store, HAProxy keeps the
# cluster's port on whichever member is primary (Patroni itself comes from requirements.txt).
[[ -x /usr/bin/etcd ]] || missing+=(etcd-server)
have etcdctl || missing+=(etcd-client)
[[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
# arping (iputils): the gratuitous ARP of a cluster's optional floating address when it moves to
# the primary's node (panel/clusters/standbys/engine/vip_follow.py; `ip` itself is iproute2's).
[[ -x /usr/bin/arping ]] || missing+=(iputils-arping)
if [[ "$mode" == test ]]; then
    # rsyslog: the log forwarding tests (panel/logsink) send to a real one on loopback.
    [[ -x /usr/sbin/rsyslogd ]] || have rsyslogd || missing+=(rsyslog)
    # rsyslog's TLS driver: the forwarding tests send to a TLS listener too.
    compgen -G '/usr/lib/*/rsyslog/lmnsd_gtls.so' >/dev/null || missing+=(rsyslog-gnutls)
fi
if [[ "$mode" == test ]]; then
    have chromium || missing+=(chromium)
    # A real Prometheus scrapes the clusters' metrics endpoints in tests/test_pydo_managed.py.
    have prometheus || missing+=(prometheus)
fi
if ! have "$PYTHON"; then
    missing+=(python3 python3-venv)
elif [[ ! -x "$VENV/bin/python" ]] && ! "$PYTHON" -c "import ensurepip, venv" >/dev/null 2>&1; then
    # Debian splits `python3 -m venv` (and the pip it bootstraps) into python3-venv.
    missing+=(python3-venv)
fi

if ((${#missing[@]})); then
    if [[ "$(id -u)" -ne 0 ]]; then
        echo "Missing system packages: ${missing[*]}. Install them with:" >&2
        echo >&2
        echo "    sudo apt-get install -y ${missing[*]}" >&2
        echo >&2
        echo "then run this command again." >&2
        exit 1
    fi
    echo "==> apt-get install -y ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y "${missing[@]}"
fi

# --- virtual environment ------------------------------------------------------------------------

if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c "" >/dev/null 2>&1; then
    # A venv whose interpreter went away (Python upgraded or removed): build it again.
    echo "==> $VENV is broken; recreating it"
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "==> $PYTHON -m venv $VENV"
    "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.requirements.sha256"
wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
    echo "==> pip install -r requirements.txt"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r requirements.txt
    echo "$wanted" >"$stamp"
fi
