#!/bin/sh
# The capable-model bench committed here: every request answered through ../shared/relay/ by a
# helper agent acting as the model (from each request alone; it tested its code locally before
# answering, which a model behind an API cannot). Start the relay server first and put its URL in
# place of RELAY_URL. Run from the repository root; re-running it continues.
ai-scientist bench run --tasks circle_packing --seeds 1 --out bench/results/bench_relay \
  --label 'relay (capable model answered by hand)' \
  --set llm.backend=openai --set llm.base_url=RELAY_URL --set llm.model=relay \
  --set llm.timeout_s=5400 --set llm.max_attempts=2 --set report.enabled=false \
  --set agent.stages.stage1_max_iters=2 --set agent.stages.stage2_max_iters=1 \
  --set agent.stages.stage3_max_iters=1 --set agent.stages.stage4_max_iters=1 \
  --set memory.embedding.backend=none --set context.model_context_window=128000
ai-scientist bench report bench/results/bench_relay
