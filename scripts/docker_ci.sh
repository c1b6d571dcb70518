#!/usr/bin/env bash
# Start / stop a private Docker daemon for CI and build the sandbox image without a registry.
#
#   scripts/docker_ci.sh start   # prints `export DOCKER_HOST=...`; eval it:  eval "$(scripts/docker_ci.sh start)"
#   scripts/docker_ci.sh stop    # stops the daemon by its pid file (never by name)
#   scripts/docker_ci.sh status
#
# Installs nothing (CI apt-installs docker.io and bubblewrap first). The daemon gets its own
# --data-root, --exec-root, --pidfile and unix socket under $AI_SCI_DOCKER_DIR
# (default $AI_SCI_TMP/dockerd, per checkout: scripts/ci_paths.sh) and no iptables / ip-forward / bridge, so it touches neither
# the host's firewall nor a system dockerd. Needs root. Exit 0 with DOCKER_HOST printed on
# success; exit 1 with the reason (and the daemon log tail) on stderr otherwise.
set -euo pipefail
source "$(dirname "$0")/ci_paths.sh"
DIR="${AI_SCI_DOCKER_DIR:-$AI_SCI_TMP/dockerd}"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"
IMAGE="${AI_SCI_SANDBOX_IMAGE:-ai-scientist-sandbox:latest}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker || true)"

die() { echo "docker_ci: $*" >&2; exit 1; }

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start() {
  [ "$(id -u)" = 0 ] || die "dockerd needs root (running as uid $(id -u))"
  command -v dockerd >/dev/null || die "dockerd not installed (apt-get install -y docker.io)"
  [ -n "$DOCKER" ] || die "docker CLI not installed (apt-get install -y docker.io)"
  mkdir -p "$DIR/data" "$DIR/exec"
  if ! running; then
    # setsid: the daemon must not share the CI job's process group (a Ctrl-C there is not for it)
    setsid dockerd --data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE" \
      -H "unix://$SOCK" --iptables=false --ip-forward=false --bridge=none \
      >"$LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
      DOCKER_HOST="unix://$SOCK" "$DOCKER" version >/dev/null 2>&1 && break
      sleep 0.5
    done
  fi
  DOCKER_HOST="unix://$SOCK" "$DOCKER" version >/dev/null 2>&1 \
    || { tail -n 20 "$LOG" >&2 || true; die "dockerd did not come up on $SOCK (log: $LOG)"; }
  # AI_SCI_REBUILD_IMAGE=1 rebuilds it (e.g. after apt-installing python3-numpy on the host)
  if [ -n "${AI_SCI_REBUILD_IMAGE:-}" ] || ! DOCKER_HOST="unix://$SOCK" "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
    DOCKER_HOST="unix://$SOCK" DOCKER="$DOCKER" "$HERE/containers/build_rootfs_image.sh" "$IMAGE" >&2
  fi
  echo "export DOCKER_HOST=unix://$SOCK"
}

stop() {
  if running; then
    pid="$(cat "$PIDFILE")"
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    echo "docker_ci: stopped dockerd (pid $pid)" >&2
  else
    echo "docker_ci: no dockerd running from $PIDFILE" >&2
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) if running; then echo "running pid $(cat "$PIDFILE") socket $SOCK"; else echo "not running"; exit 1; fi ;;
  *) die "usage: $0 start|stop|status" ;;
esac
