#!/bin/sh
# One image, three roles (compose.yaml): web prepares the database and static files, then serves;
# worker and beat run Celery. Anything else runs as a command, e.g. `python manage.py cluster list`.
set -eu

role="${1:-web}"
case "$role" in
web)
    python manage.py migrate --no-input
    python manage.py collectstatic --no-input --verbosity 0
    python manage.py ensureadmin --url "${PANEL_URL:-http://localhost:8000/}"
    exec gunicorn panel.wsgi -b "${PANEL_BIND:-0.0.0.0:8000}" --workers 2 --threads 4 \
        --graceful-timeout 5 --access-logfile -
    ;;
worker)
    exec celery -A panel worker -Q default,benchmarks --loglevel INFO
    ;;
beat)
    exec celery -A panel beat --loglevel INFO --schedule "$PANEL_DATA_DIR/celerybeat-schedule"
    ;;
*)
    exec "$@"
    ;;
esac
