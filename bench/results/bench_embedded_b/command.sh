#!/bin/sh
# Variant B of the embedded-model bench (run from the repository root); re-running it continues.
ai-scientist bench run bench/results/bench_embedded_b/config.yaml --tasks label_noise,tsp --seeds 2 \
  --out bench/results/bench_embedded_b --label "embedded model: harness only (SmolLM2-135M, 2 nodes/run, 1500-token code answers)"
ai-scientist bench report bench/results/bench_embedded bench/results/bench_embedded_b
