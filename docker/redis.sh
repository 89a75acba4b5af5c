#!/bin/sh
# The broker of the stack (docker/compose.yaml), always with a password: whoever can write to it
# sends the node agent, which runs as root, its tasks. REDIS_PASSWORD comes from the environment and
# goes to redis-server in a 0600 file, never on a command line where `ps` would show it.
# Nothing is kept on disk: queued tasks are lost with the container, as with make run's Redis.
#
#   pgpanel-redis           run redis-server on port 6379 of every interface
#   pgpanel-redis health    exit 0 when it answers PING with the password (the healthcheck)
set -eu

if [ -z "${REDIS_PASSWORD:-}" ]; then
    echo "pgpanel-redis: REDIS_PASSWORD is not set; this Redis runs only with a password." >&2
    exit 2
fi

if [ "${1:-}" = health ]; then
    # redis-cli reads the password from REDISCLI_AUTH, which keeps it off the command line too.
    [ "$(REDISCLI_AUTH="$REDIS_PASSWORD" redis-cli -h 127.0.0.1 -p 6379 ping)" = PONG ]
    exit
fi

umask 077
conf="${REDIS_CONF:-/var/lib/redis/pgpanel.conf}"
# Escaped for redis.conf's double quotes, as scripts/run.py does for make run's own Redis.
password=$(printf '%s' "$REDIS_PASSWORD" | sed 's/\\/\\\\/g; s/"/\\"/g')
cat > "$conf" <<EOF
bind * -::*
port 6379
protected-mode yes
save ""
appendonly no
daemonize no
dir /var/lib/redis
logfile ""
requirepass "$password"
EOF
exec redis-server "$conf"
