"""Token counters and the budget ceiling."""

from __future__ import annotations

from ai_scientist.base.config import Config
from ai_scientist.context import Budget, counter_for
from ai_scientist.context.tokens import BPECounter, EstimateCounter, encoding_for, messages_tokens


def test_openai_models_get_exact_offline_bpe_counts():
    assert encoding_for("gpt-4o-mini") == "o200k_base"
    assert encoding_for("openai/gpt-4.1") == "o200k_base"
    assert encoding_for("o3-mini") == "o200k_base"
    assert encoding_for("gpt-4-turbo") == "cl100k_base"
    assert encoding_for("gpt-3.5-turbo") == "cl100k_base"
    c = counter_for("gpt-4o")
    assert isinstance(c, BPECounter) and c.exact
    assert c.count("hello world") == 2
    assert c.count("") == 0


def test_unknown_model_is_estimated_and_marked():
    c = counter_for("qwen2.5-coder-7b")
    assert isinstance(c, EstimateCounter) and not c.exact
    assert c.count("abcdefgh") == 2
    assert c.count("abcdefghi") == 3  # rounds up: estimates must not under-count


def test_local_tokenizer_callable_wins():
    calls = []
    c = counter_for("anything.gguf", local_count_fn=lambda t: calls.append(t) or len(t.split()))
    assert c.exact and c.count("a b c") == 3 and calls == ["a b c"]


def test_long_text_is_counted_in_pieces_close_to_whole():
    c = counter_for("gpt-4o")
    line = "the quick brown fox jumps over the lazy dog 12345\n"
    text = line * 25_000  # 1.25M chars: over bpe_openai's single-call limit
    per_line = c.count(line)
    assert abs(c.count(text) - per_line * 25_000) <= 10


def test_budget_is_min_of_max_prompt_tokens_and_window_minus_reserve():
    ctx = Config.model_validate({"context": {"max_prompt_tokens": 6000}}).context
    assert Budget.from_config(ctx).max_tokens == ctx.max_prompt_tokens
    b = Budget.from_config(ctx, model_context_window=4096)
    assert b.max_tokens == 4096 - ctx.reserved_output_tokens
    assert "window" in b.source
    # estimates keep a safety margin
    assert b.limit_for(EstimateCounter()) < b.max_tokens
    assert b.limit_for(counter_for("gpt-4o")) == b.max_tokens


def test_message_overhead_is_counted():
    c = counter_for("gpt-4o")
    msgs = [{"role": "system", "content": "a"}, {"role": "user", "content": "b"}]
    assert messages_tokens(msgs, c) > c.count("a") + c.count("b") + 2 * 3
