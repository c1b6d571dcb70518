#!/usr/bin/env bash
# Set up everything the tests need and run the whole suite (the README's test command).
# Starts a private Docker daemon for the Docker sandbox tests when docker.io is installed,
# and stops it (by its pid) afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-test-tools

docker_started=0
if [ -x scripts/docker_ci.sh ] || [ -f scripts/docker_ci.sh ]; then
  if env_out=$(bash scripts/docker_ci.sh start); then
    eval "$env_out"
    docker_started=1
  else
    echo "[test] private dockerd could not start; Docker tests will skip with the reason" >&2
  fi
fi
cleanup() { if [ "$docker_started" = 1 ]; then bash scripts/docker_ci.sh stop || true; fi; }
trap cleanup EXIT

set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "[test] pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
