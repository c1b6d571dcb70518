#!/usr/bin/env bash
# Set up everything the tests need, lint (scripts/lint.sh) and run the whole suite (the README's test command).
# Starts a private Docker daemon for the Docker sandbox tests when docker.io is installed,
# and a private single-node Slurm cluster (scripts/slurm_ci.sh) for the Slurm tests,
# and stops them (by their pids) afterwards.
# After a passing suite, the mutation step: scripts/mutation.sh --ci (docs/testing.md, "In CI").
# With CI=true every real component is required (AI_SCI_REQUIRE=all unless set: tests/components.py):
# a daemon that cannot start stops this script naming it, and a test that would skip for a missing
# component fails naming it. Elsewhere such tests skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
if [ "${CI:-}" = true ]; then
  ci=1
  export AI_SCI_REQUIRE="${AI_SCI_REQUIRE:-all}"
  echo "[test] CI=true: required components: $AI_SCI_REQUIRE" >&2
fi
# required() in tests/components.py: does AI_SCI_REQUIRE name this component?
required() { [ "$ci" = 1 ] && case ",${AI_SCI_REQUIRE:-}," in *",all,"*|*",$1,"*) true ;; *) false ;; esac; }
bash scripts/setup.sh --with-test-tools

# ruff and mypy, no error tolerated (docs/testing.md); the suite runs either way, the exit
# status is a failure when the lint failed.
lint_rc=0
bash scripts/lint.sh || lint_rc=$?

docker_started=0
if [ -x scripts/docker_ci.sh ] || [ -f scripts/docker_ci.sh ]; then
  if env_out=$(bash scripts/docker_ci.sh start); then
    eval "$env_out"
    docker_started=1
  elif required docker; then
    echo "[test] required component 'docker' unavailable: the private dockerd could not start (see above)" >&2
    exit 1
  else
    echo "[test] private dockerd could not start; Docker tests will skip with the reason" >&2
  fi
elif required docker; then
  echo "[test] required component 'docker' unavailable: scripts/docker_ci.sh is missing" >&2
  exit 1
fi
slurm_started=0
if env_out=$(bash scripts/slurm_ci.sh start); then
  eval "$env_out"
  slurm_started=1
elif required slurm; then
  [ "$docker_started" = 1 ] && { bash scripts/docker_ci.sh stop || true; }
  echo "[test] required component 'slurm' unavailable: the private Slurm cluster could not start (see above)" >&2
  exit 1
else
  echo "[test] private Slurm cluster could not start; real-cluster Slurm tests will skip with the reason" >&2
fi
cleanup() {
  if [ "$docker_started" = 1 ]; then bash scripts/docker_ci.sh stop || true; fi
  if [ "$slurm_started" = 1 ]; then bash scripts/slurm_ci.sh stop || true; fi
}
trap cleanup EXIT

set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
if [ "$rc" = 5 ]; then echo "[test] pytest collected no tests: failing" >&2; exit 1; fi

# --- Mutation step (docs/testing.md, "In CI"; run alone: scripts/mutation.sh --ci) ---
# The core modules whose code or focused tests changed since their score was measured
# (.ci/mutation-base), within MUTATION_BUDGET seconds (default 480; 0 skips the step, said so).
# A module under MUTATION_MIN (85 %) fails the run; one that does not fit is skipped with a line.
mutation_rc=0
if [ "$rc" != 0 ]; then
  echo "[test] mutation step not run: the suite failed" >&2
elif [ "${MUTATION_BUDGET:-}" = 0 ]; then
  echo "[test] mutation step skipped: MUTATION_BUDGET=0" >&2
else
  bash scripts/mutation.sh --ci || mutation_rc=$?
fi
# --- end of the mutation step ---

if [ "$rc" = 0 ] && [ "$lint_rc" != 0 ]; then echo "[test] scripts/lint.sh failed (see its output above)" >&2; exit 1; fi
if [ "$rc" = 0 ] && [ "$mutation_rc" != 0 ]; then echo "[test] the mutation step failed (scripts/mutation.sh --ci, see above)" >&2; exit 1; fi
exit "$rc"
