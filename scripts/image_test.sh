#!/usr/bin/env bash
# make image-test: build the container images and run the stack of docker/compose.yaml for real
# with podman, use it from the command line and the web page, and tear it all down.
# Not part of make test: it needs root, podman and a few minutes (seconds once the layers are cached).
#
#   1. installs what is missing (apt: podman, runc, debootstrap, netavark, aardvark-dns; pip into
#      a venv of its own: podman-compose)
#   2. makes the base image docker.io/library/debian:bookworm-slim locally with debootstrap when
#      it is absent (no registry is needed, or reached), from the mirror of this host's apt sources
#   3. builds the images redis, metadb and panel from docker/Dockerfile (layers cached)
#   4. writes an env file with fresh secrets (0600, outside the repository)
#   5. compose up; measures the seconds until the login page answers 200
#   6. runs every container's healthcheck until it passes
#   7. in the agent container: cluster create, bench init, a short bench run (TPS must be > 0), a
#      pool and a run through it; as admin on the web page, a database user added (which only the
#      node agent can do); psql from this host to the cluster through its published port
#   8. prints the image size, the seconds to the login page and the TPS; compose down -v, also
#      on failure (then with the logs of the failing containers), and exits non-zero on failure
#
# Environment: IMAGE_TEST_DIR (default /var/tmp/pgpanel-image-test: containers.conf, the env file,
# the compose venv, build logs), IMAGE_TEST_KEEP=1 leaves the stack up for a look.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPERS=("python3" "$ROOT/scripts/image_test_helpers.py")
WORK=${IMAGE_TEST_DIR:-/var/tmp/pgpanel-image-test}
PROJECT=pgpanel-test
BASE_IMAGE=docker.io/library/debian:bookworm-slim
PANEL_IMAGE=localhost/pgpanel:latest
PODMAN_COMPOSE_VERSION=1.6.0
CLUSTER=db-imagetest
UP_TIMEOUT=300
HEALTH_TIMEOUT=120
COMPOSE=()
FOCUS="" # the container whose logs matter most if the current step fails

say() { printf '==> %s\n' "$*"; }
die() {
    printf 'image-test: %s\n' "$*" >&2
    exit 1
}

[[ $(id -u) == 0 ]] || die "run as root: podman builds and runs the stack as root (sudo make image-test)"

# --- tools -----------------------------------------------------------------------------------------

install_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    # netavark with aardvark-dns gives the compose network DNS names (web reaches metadb by name).
    # Without them podman 4.3 falls back to CNI, whose networks here have no DNS (no dnsname plugin).
    [[ -x /usr/lib/podman/netavark ]] || missing+=(netavark)
    [[ -x /usr/lib/podman/aardvark-dns ]] || missing+=(aardvark-dns)
    if ((${#missing[@]})); then
        say "apt-get install ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    fi
    # podman-compose from PyPI: Debian's 1.0.3 has no --env-file (it reads only a .env beside the
    # compose file, which would put the secrets in the repository) and ignores the file's `name`.
    local venv="$WORK/compose-venv"
    if [[ $("$venv/bin/podman-compose" --version 2>/dev/null | head -1) != *" $PODMAN_COMPOSE_VERSION" ]]; then
        say "pip install podman-compose==$PODMAN_COMPOSE_VERSION (into $venv)"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "podman-compose==$PODMAN_COMPOSE_VERSION"
    fi
    COMPOSE=("$venv/bin/podman-compose" --project-name "$PROJECT" --env-file "$WORK/env"
        -f "$ROOT/docker/compose.yaml")
}

# podman's defaults fail on this kind of host: crun with hybrid cgroups, setrlimit denied for the
# default ulimits, no systemd for the systemd cgroup manager.
write_containers_conf() {
    cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"

[network]
network_backend = "netavark"
EOF
    export CONTAINERS_CONF="$WORK/containers.conf"
}

# --- images ----------------------------------------------------------------------------------------

build_base() {
    if podman image exists "$BASE_IMAGE"; then
        return
    fi
    local mirror security rootfs="$WORK/rootfs"
    mirror=$("${HELPERS[@]}" apt-uri bookworm) || die "no 'bookworm' suite in this host's apt sources"
    security=$("${HELPERS[@]}" apt-uri bookworm-security || true)
    say "debootstrap --variant=minbase bookworm (from this host's apt mirror)"
    rm -rf "$rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
        die "debootstrap failed; see $WORK/debootstrap.log"
    # What Debian's official slim image does: no documentation, manuals or translations, no apt
    # caches, and packages do not try to start their services inside a build.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
EOF
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
    printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
    chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/{groff,info,linda,locale,man}/* "$rootfs"/usr/share/lintian/overrides/*
    rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/*
    # The mirror this host uses, in the base's own sources (never in the repository).
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n' "$mirror"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        if [[ -n $security ]]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\n' "$security"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    say "podman import $BASE_IMAGE"
    tar -C "$rootfs" -c . | podman import --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
}

build_images() {
    local ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt} secret=() target tag old
    # pip inside the build trusts what this host trusts (a proxy's CA): a build secret, mounted for
    # the pip step only, never copied into a layer.
    [[ -s $ca ]] && secret=(--secret "id=pip-ca,src=$ca")
    for target in redis metadb panel; do
        tag=localhost/pgpanel-$target:latest
        [[ $target == panel ]] && tag=$PANEL_IMAGE
        say "podman build --target $target -t $tag"
        old=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
        # Host networking: apt in the build reaches the mirror as this host does.
        podman build --network host "${secret[@]}" --layers --target "$target" -t "$tag" \
            -f "$ROOT/docker/Dockerfile" --ignorefile "$ROOT/docker/Dockerfile.dockerignore" \
            "$ROOT" >"$WORK/build-$target.log" 2>&1 || {
            tail -40 "$WORK/build-$target.log" >&2
            die "building $target failed; see $WORK/build-$target.log"
        }
        # The image this build replaced, now untagged: each run would otherwise leave one behind.
        if [[ -n $old && $old != $(podman image inspect --format '{{.Id}}' "$tag") ]]; then
            podman rmi "$old" >/dev/null 2>&1 || true
        fi
    done
}

# --- the stack -------------------------------------------------------------------------------------

write_env() {
    read -r WEB_PORT CLUSTER_PORTS < <("${HELPERS[@]}" free-ports)
    (
        umask 077
        "${HELPERS[@]}" env-file >"$WORK/env"
        printf 'PANEL_HTTP_PORT=%s\nPANEL_PORTS=%s\n' "$WEB_PORT" "$CLUSTER_PORTS" >>"$WORK/env"
    )
}

project_containers() {
    podman ps -a --filter "label=com.docker.compose.project=$PROJECT" --format '{{.Names}}'
}

container_of() {
    podman ps -a --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -1
}

show_failure() {
    local name state
    printf '\n==> containers of %s\n' "$PROJECT" >&2
    podman ps -a --filter "label=com.docker.compose.project=$PROJECT" \
        --format '{{.Names}}\t{{.Status}}' >&2 || true
    for name in $(project_containers); do
        state=$(podman inspect --format '{{.State.Status}} {{.State.Health.Status}}' "$name" 2>/dev/null || true)
        if [[ $name == "$FOCUS" || $state != running* || $state == *unhealthy* ]]; then
            printf '\n==> logs of %s (%s)\n' "$name" "$state" >&2
            podman logs --tail 80 "$name" >&2 || true
        fi
    done
}

teardown() {
    local status=$?
    set +e
    ((status == 0)) || show_failure
    if [[ ${IMAGE_TEST_KEEP:-} == 1 ]]; then
        say "IMAGE_TEST_KEEP=1: the stack stays up; take it down with:"
        echo "CONTAINERS_CONF=$WORK/containers.conf ${COMPOSE[*]} down -v && rm $WORK/env"
    else
        say "compose down -v"
        "${COMPOSE[@]}" down -v -t 60 >"$WORK/down.log" 2>&1 || cat "$WORK/down.log" >&2
        rm -f "$WORK/env"
    fi
    ((status == 0)) || printf 'image-test: FAILED (exit %d)\n' "$status" >&2
    exit "$status"
}

# Restarted by its restart policy more than twice: a start that keeps failing, not a slow one.
crash_looping() {
    local name
    for name in $(project_containers); do
        if (($(podman inspect --format '{{.RestartCount}}' "$name") > 2)); then
            echo "$name"
            return 0
        fi
    done
    return 1
}

# Seconds (one decimal) from $1 (a `date +%s%N`) until the login page answers 200.
wait_for_login_page() {
    local url="http://127.0.0.1:$WEB_PORT/login/" start=$1 polls=0 looping
    until [[ $("${HELPERS[@]}" login-status "$url") == 200 ]]; do
        (($(date +%s%N) - start < UP_TIMEOUT * 1000000000)) || die "no 200 from $url within $UP_TIMEOUT s"
        if ((++polls % 10 == 0)) && looping=$(crash_looping); then
            FOCUS=$looping
            die "$looping keeps exiting"
        fi
        sleep 0.2
    done
    local elapsed=$((($(date +%s%N) - start) / 100000000))
    printf '%d.%d\n' $((elapsed / 10)) $((elapsed % 10))
}

# podman runs healthchecks on systemd timers; on a host without systemd (this one) nothing runs
# them, so they are run here until each passes, which also tests every healthcheck of compose.yaml.
wait_healthy() {
    local service name deadline
    for service in metadb redis web agent; do
        name=$(container_of "$service")
        FOCUS=$name
        deadline=$((SECONDS + HEALTH_TIMEOUT))
        until podman healthcheck run "$name" >/dev/null 2>&1; do
            ((SECONDS < deadline)) || die "the healthcheck of $service did not pass within $HEALTH_TIMEOUT s"
            sleep 2
        done
        printf '    %-7s %s\n' "$service" "$(podman inspect --format '{{.State.Health.Status}}' "$name")"
    done
}

in_agent() {
    podman exec "$AGENT" python manage.py "$@"
}

# Log in as admin with the password web printed once, and add a database user on the cluster's
# Users tab: the web container cannot reach the cluster, so the node agent must have done it.
web_add_user() {
    local web password
    web=$(container_of web)
    password=$(podman logs "$web" 2>&1 | sed -n 's/.* as admin with password \([^ ]*\)$/\1/p' | head -1)
    [[ -n $password ]] || die "web did not print the admin password"
    ADMIN_PASSWORD=$password "${HELPERS[@]}" web-add-user "http://127.0.0.1:$WEB_PORT" "$1" ||
        die "adding a user from the web page failed"
}

main() {
    mkdir -p "$WORK"
    chmod 0700 "$WORK"
    write_containers_conf
    install_tools
    build_base
    build_images

    trap teardown EXIT
    write_env
    # A stack left by an interrupted run would hold the ports and the volumes.
    "${COMPOSE[@]}" down -v >/dev/null 2>&1 || true

    say "compose up -d (web on 127.0.0.1:$WEB_PORT, clusters on 127.0.0.1:$CLUSTER_PORTS)"
    local start up_seconds
    start=$(date +%s%N)
    "${COMPOSE[@]}" up -d >"$WORK/up.log" 2>&1 || {
        cat "$WORK/up.log" >&2
        die "compose up failed"
    }
    FOCUS=$(container_of web)
    up_seconds=$(wait_for_login_page "$start")
    say "login page served ${up_seconds} s after compose up"

    say "healthchecks"
    wait_healthy

    AGENT=$(container_of agent)
    FOCUS=$AGENT
    say "manage.py cluster create $CLUSTER (in $AGENT)"
    in_agent cluster create --name "$CLUSTER" --plan db-s-1vcpu-1gb
    [[ $(in_agent cluster list) =~ $CLUSTER[[:space:]]+admin[[:space:]]+online ]] ||
        die "$CLUSTER is not online: $(in_agent cluster list)"

    say "manage.py bench init and run"
    in_agent bench init "$CLUSTER" --database defaultdb --scale 2 --wait
    local result tps
    result=$(in_agent bench run "$CLUSTER" --database defaultdb --clients 4 --threads 2 \
        --duration 5 --wait --format json)
    tps=$("${HELPERS[@]}" run-tps "$result") || die "the benchmark failed"

    say "manage.py pool create, and a run through PgBouncer"
    in_agent pool create "$CLUSTER" bench-pool --database defaultdb --size 4
    result=$(in_agent bench run "$CLUSTER" --pool bench-pool --clients 4 --threads 2 --duration 3 \
        --wait --format json)
    "${HELPERS[@]}" run-tps "$result" >/dev/null || die "the run through the pool failed"

    FOCUS=$(container_of web)
    say "add a database user from the web page (web → node agent → cluster)"
    web_add_user webcheck

    # From this host, through the port the agent publishes: the address in connection details.
    FOCUS=$AGENT
    if command -v psql >/dev/null; then
        say "psql from the host to $CLUSTER's published port"
        local uri
        uri=$(in_agent cluster connection "$CLUSTER" --format uri)
        [[ $(psql "$uri" -XAtc "select count(*) from pg_roles where rolname = 'webcheck'") == 1 ]] ||
            die "the cluster did not answer on its published port, or has no user webcheck"
    fi

    local size
    size=$(podman image inspect --format '{{.Size}}' "$PANEL_IMAGE")
    echo
    say "image-test passed"
    printf '    image %s: %s (%s bytes)\n' "$PANEL_IMAGE" "$(numfmt --to=iec-i --suffix=B "$size")" "$size"
    printf '    compose up to login page: %s s\n' "$up_seconds"
    printf '    benchmark: %s TPS (pgbench tpcb-like, 4 clients, 5 s, scale 2)\n' "$tps"
}

main "$@"
