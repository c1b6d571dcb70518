# Sourced by docker_ci.sh, slurm_ci.sh and setup.sh: where this checkout's private daemons and
# test venv live. Two checkouts (two CI runs on one machine) get two directories, so neither
# stops or rebuilds the other's daemons; one checkout keeps reusing its own.
#   AI_SCI_TMP  default /tmp/ai-sci-<first 8 hex of sha256 of this checkout's real path>
# (tests/ci_paths.py derives the same name in Python.)
_ai_sci_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
AI_SCI_TMP="${AI_SCI_TMP:-/tmp/ai-sci-$(printf %s "$_ai_sci_root" | sha256sum | cut -c1-8)}"
mkdir -p "$AI_SCI_TMP"
chmod 755 "$AI_SCI_TMP"  # the non-root test venv below it is read by an unprivileged user
unset _ai_sci_root

# free_port: a TCP port on 127.0.0.1 nothing listens on now
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
