#!/usr/bin/env bash
# Make a Docker engine answer for the containers backend, and have what infra/images.py builds with.
#
#   infra/engine.sh            # check only: exit 0 when `docker info` answers, else say what to run
#   infra/engine.sh --install  # where no engine runs: install Debian's docker.io (and debootstrap for the
#                              # local image builds) with apt-get, start dockerd in the background
#
# CI=true implies --install. An engine that already answers is used as it is and never touched.
# The dockerd started here uses the overlay2 storage driver and no default bridge (every container of the
# suite uses host networking) and logs to $CHAOS_DOCKERD_LOG (default /var/log/chaos-suite-dockerd.log).
# It keeps running after this script; stop it with: kill "$(cat /var/run/docker.pid)".
set -euo pipefail

LOG=${CHAOS_DOCKERD_LOG:-/var/log/chaos-suite-dockerd.log}
WAIT_S=${CHAOS_DOCKERD_WAIT_S:-60}
install=false
for arg in "$@"; do
    case "$arg" in
        --install) install=true ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "engine.sh: unknown argument $arg (allowed: --install)" >&2; exit 2 ;;
    esac
done
[ "${CI:-}" = "true" ] && install=true

say() { echo "[engine] $*" >&2; }

answers() { docker info >/dev/null 2>&1; }

need_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v docker >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    [ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || missing+=(debian-archive-keyring)
    printf '%s\n' "${missing[@]}" | sort -u | grep -v '^$' || true
}

missing=$(need_packages)
if answers && [ -z "$missing" ]; then
    say "docker answers ($(docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null)); debootstrap present"
    exit 0
fi
if ! $install; then
    if answers; then
        say "docker answers, but $(echo $missing) is missing for local image builds; run: infra/engine.sh --install"
    else
        say "no Docker engine answers; run: infra/engine.sh --install (installs Debian's docker.io and starts dockerd), or start your own engine"
    fi
    exit 3
fi
if [ "$(id -u)" != 0 ]; then
    say "installing packages and starting dockerd needs root; run as root: infra/engine.sh --install"
    exit 3
fi

if [ -n "$missing" ]; then
    say "installing $(echo $missing) with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    # Lists are refreshed only when the first try fails (a fresh machine has none, or stale ones).
    # shellcheck disable=SC2086
    if ! apt-get install -y -qq --no-install-recommends $missing >/dev/null 2>&1; then
        apt-get update -qq
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $missing >/dev/null
    fi
fi

if ! answers; then
    if pgrep -x dockerd >/dev/null 2>&1; then
        say "a dockerd is running but does not answer yet; waiting"
    else
        say "starting dockerd (overlay2, no default bridge); log: $LOG"
        mkdir -p "$(dirname "$LOG")"
        # setsid: the daemon outlives this script and the shell that ran it. Descriptors above 2 are closed
        # first: a long-lived daemon must not hold what the caller had open (a lock file around `.ci/run`
        # stayed locked by dockerd for as long as it ran).
        (
            for fd in /proc/self/fd/*; do
                fd=${fd##*/}
                if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
            done
            exec setsid nohup dockerd --storage-driver overlay2 --bridge none --iptables=false \
                >>"$LOG" 2>&1 </dev/null
        ) &
    fi
    for _ in $(seq $((WAIT_S * 2))); do
        answers && break
        sleep 0.5
    done
    if ! answers; then
        say "dockerd did not answer within ${WAIT_S} s; last lines of $LOG:"
        tail -n 5 "$LOG" >&2 || true
        exit 3
    fi
fi
say "docker answers ($(docker info --format '{{.ServerVersion}} {{.Driver}}' 2>/dev/null))"
