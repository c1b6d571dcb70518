#!/usr/bin/env bash
# Record the replay fixture of tests/test_replay_fixture.py with the code at HEAD:
#   bash scripts/record_fixture.sh        -> tests/fixtures/run_<short HEAD>/ (old run_* fixtures removed)
# A scripted run of the bundled example (2 workers, all four stages, one seed re-run per stage),
# trimmed to what replay reads. Run it only when a change alters prompts or calls on purpose, and
# say so in the commit; a refactor must pass the existing fixture unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
commit=$(git rev-parse --short=7 HEAD)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git worktree add -q --detach "$work/src" HEAD
trap 'git -C "$root" worktree remove --force "$work/src"; rm -rf "$work"' EXIT
PYTHONPATH="$work/src:$work/src/tests" "$root/.venv/bin/python" - "$work/out" <<'PY'
import sys
from pathlib import Path

from pipeline_support import start_run

code, run_dir, _ = start_run(
    Path(sys.argv[1]),
    "agent.num_workers=2",
    "agent.stages.stage1_max_iters=3",
    "agent.stages.stage2_max_iters=1",
    "agent.stages.stage3_max_iters=1",
    "agent.stages.stage4_max_iters=1",
    "agent.multi_seed_eval.num_seeds=1",
    name="recorded",
)
if code != 0:
    sys.exit(f"the recorded run ended with exit {code}")
PY
rec="$work/out/experiments/recorded"
# what replay does not read: the memory database (rebuilt), viewer, figures, paper, logs, the lock,
# prompt-log renderings, install prefixes, node figures (re-made from the workspace), probe scratch
rm -rf "$rec"/memory.sqlite* "$rec"/tree.html "$rec"/figures "$rec"/paper "$rec"/run.log "$rec"/run.lock \
  "$rec"/nodes/*/prompt_logs/*.md "$rec"/nodes/*/env "$rec"/nodes/*/plots "$rec"/sandbox_probe
find "$rec" -type l -delete  # workspace/resources links point into the recording machine's run directory
find "$rec" -type d -empty -delete  # git keeps no empty folder: test what a clone has
rm -rf tests/fixtures/run_*
cp -r "$rec" "tests/fixtures/run_$commit"
sed -i "s|fixtures\" / \"run_[0-9a-f]*\"|fixtures\" / \"run_$commit\"|" tests/test_replay_fixture.py tests/test_paths.py bench/local_kv.py
echo "tests/fixtures/run_$commit ($(du -sh --apparent-size "tests/fixtures/run_$commit" | cut -f1)); update the fixture's name in tests/test_replay_fixture.py's docstring"
