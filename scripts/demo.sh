#!/usr/bin/env bash
# Set up and run the main job: a small research run on the bundled example with the embedded
# local model (SmolLM2-135M-Instruct via llama.cpp; no API key needed). Prints the run directory.
# The first drafts start from the example's working baseline (examples/label_noise/seed_code.py).
# Extra arguments go to `ai-scientist run`, e.g. --set agent.stages.stage1_max_iters=2
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/ai-scientist run examples/label_noise/config.yaml --idea examples/label_noise/idea.md \
  --load-code examples/label_noise/seed_code.py "$@"
