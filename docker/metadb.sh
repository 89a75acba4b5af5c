#!/bin/sh
# The panel's metadata database (DATABASE_URL) for docker/compose.yaml: PostgreSQL 15 from the same
# packages as the clusters, its data in the volume on $PGDATA, reached over the network with a
# password (scram-sha-256). Runs as the user postgres.
#
# On first start (an empty $PGDATA) it creates the cluster, the login role $METADB_USER with the
# password $METADB_PASSWORD and the database $METADB_DATABASE that role owns. The superuser
# `postgres` has no password and logs in only over the local socket (peer).
#
#   pgpanel-metadb           initialise if needed, then run postgres in the foreground
#   pgpanel-metadb health    exit 0 when the server accepts connections over TCP (the healthcheck)
set -eu

bindir=/usr/lib/postgresql/15/bin
user="${METADB_USER:-pgpanel}"
database="${METADB_DATABASE:-pgpanel}"

if [ "${1:-}" = health ]; then
    exec pg_isready --quiet --host 127.0.0.1 --port 5432 --username "$user" --dbname "$database"
fi

if [ -z "${METADB_PASSWORD:-}" ]; then
    echo "pgpanel-metadb: METADB_PASSWORD is not set." >&2
    exit 2
fi

umask 077
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    echo "pgpanel-metadb: initialising $PGDATA"
    "$bindir/initdb" --pgdata "$PGDATA" --username postgres --encoding UTF8 --locale C.UTF-8 \
        --auth-local peer --auth-host scram-sha-256 --no-instructions
    cat >> "$PGDATA/pg_hba.conf" <<'EOF'
# The other containers of the stack, with a password.
host all all 0.0.0.0/0 scram-sha-256
host all all ::/0 scram-sha-256
EOF
    # A server on the socket only while the role and the database are made: nobody reaches it yet.
    "$bindir/pg_ctl" --pgdata "$PGDATA" --wait --silent -o "-c listen_addresses=''" start
    # The password goes in through the environment (psql's \getenv), never on a command line.
    psql --quiet --no-psqlrc --set ON_ERROR_STOP=1 --set user="$user" --set database="$database" \
        --dbname postgres <<'EOF'
\getenv password METADB_PASSWORD
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"database" OWNER :"user";
EOF
    "$bindir/pg_ctl" --pgdata "$PGDATA" --wait --silent --mode fast stop
fi

exec "$bindir/postgres" -D "$PGDATA" -c listen_addresses='*' -c log_line_prefix='%m [%p] %q%u@%d '
