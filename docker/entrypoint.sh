#!/bin/sh
# One image, three roles (docker/compose.yaml); anything else runs as a command in the image, e.g.
# `python manage.py cluster list`.
#
#   web     migrations, the first admin account (its password printed once), then gunicorn on
#           PANEL_BIND (0.0.0.0:8000); static files were collected at build time, WhiteNoise
#           serves them. Unprivileged (the user pgpanel) and with no data volume: every action on a
#           cluster's processes, sockets or files is a task to the node agent (PANEL_PROCESS_ROLE=web).
#   beat    Celery beat, which only sends tasks; unprivileged, no data volume either.
#   agent   the node agent: the node's workers (docker/node_workers.py), as root, with the data
#           volume on PANEL_DATA_DIR; PostgreSQL, PgBouncer and pgbench run as users of their own.
#           docker/systemd/pgpanel-agent.service runs this role too, on a host.
#
# Every role first waits for the metadata database and Redis (docker/wait_ready.py); beat and
# agent also for the migrations web applies.
set -eu

# web and beat keep nothing: their data directory is scratch in the container (the web's cache,
# beat's schedule) and holds the static files collected into it at build time.
SCRATCH_DATA_DIR=/home/pgpanel/var
WEB_USER=pgpanel

# web and beat never run as root: started as root (podman run without --user), they drop to
# pgpanel here before anything reads a key.
unprivileged() {
    if [ "$(id -u)" = 0 ]; then
        exec setpriv --reuid "$WEB_USER" --regid "$WEB_USER" --init-groups env HOME=/home/pgpanel "$0" "$@"
    fi
}

role="${1:-web}"
case "$role" in
web)
    unprivileged "$@"
    export PANEL_DATA_DIR="$SCRATCH_DATA_DIR" PANEL_PROCESS_ROLE=web
    python docker/wait_ready.py
    python manage.py migrate --no-input
    python manage.py ensureadmin --url "${PANEL_URL:-http://localhost:8000/}"
    exec gunicorn panel.wsgi --bind "${PANEL_BIND:-0.0.0.0:8000}" --workers "${PANEL_WEB_WORKERS:-2}" \
        --threads 4 --graceful-timeout 5 --access-logfile - --no-control-socket
    ;;
beat)
    unprivileged "$@"
    export PANEL_DATA_DIR="$SCRATCH_DATA_DIR" PANEL_PROCESS_ROLE=web
    python docker/wait_ready.py --migrated
    # The schedule only says when each task last ran; a kill mid-write leaves it unreadable and
    # beat would die at every start (see scripts/run.py), so each start begins afresh.
    schedule="$PANEL_DATA_DIR/db/celerybeat-schedule"
    rm -f "$schedule" "$schedule".*
    exec celery -A panel beat --loglevel INFO --schedule "$schedule"
    ;;
agent)
    if [ "$(id -u)" != 0 ]; then
        echo "entrypoint: the agent runs as root (it creates each cluster's system user)" >&2
        exit 2
    fi
    python docker/wait_ready.py --migrated
    # The node's workers; the one line to change when scripts/node_agent.py takes this over.
    exec python docker/node_workers.py
    ;;
*)
    exec "$@"
    ;;
esac
