#!/bin/sh
# The embedded-model bench committed here (run from the repository root). Re-running it continues.
ai-scientist bench run bench/results/bench_embedded/config.yaml --tasks label_noise,tsp --seeds 2 \
  --out bench/results/bench_embedded --label "embedded model: harness only (SmolLM2-135M, 2 CPU cores)"
ai-scientist bench report bench/results/bench_embedded
