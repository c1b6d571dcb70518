"""Budgets follow the model a call goes to; images are counted inside the budget (issue 28)."""

from __future__ import annotations

import json

import pytest

from ai_scientist.base.config import Config, ConfigError, validate
from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.context.budget import BUDGET_POLICIES, DEFAULT_CONTEXT_WINDOW, known_window
from ai_scientist.context.tokens import IMAGE_TOKENS, messages_tokens
from ai_scientist.llm.call import CallContext
from ai_scientist.llm.client import LLMClient
from ai_scientist.llm.cost import CostLedger
from ai_scientist.llm.prompting import Prompter, ask
from ai_scientist.llm.scripted_backend import ScriptedBackend
from ai_scientist.promptlog.record import PromptLogger

PIXEL = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def _ctx(**context):
    return Config.model_validate({"context": context}).context


def test_auto_budget_comes_from_the_models_window_and_the_cost_policy():
    assert Config().context.max_prompt_tokens == "auto"
    reserve = Config().context.reserved_output_tokens
    # a 128k model under the default (balanced) policy: the policy's cap, not 6000
    b = Budget.from_config(_ctx(), model="gpt-4o")
    assert b.max_tokens == BUDGET_POLICIES["balanced"] == 32_000 and "gpt-4o window 128000" in b.source
    assert Budget.from_config(_ctx(budget_policy="economy"), model="gpt-4o").max_tokens == 12_000
    full = Budget.from_config(_ctx(budget_policy="full"), model="openai/gpt-4o-mini")
    assert full.max_tokens == 128_000 - reserve and full.source.startswith("auto (full)")
    # an unknown model with no window: the conservative default window
    unknown = Budget.from_config(_ctx(), model="my-finetune")
    assert unknown.max_tokens == DEFAULT_CONTEXT_WINDOW - reserve and "default window" in unknown.source
    # a configured window wins over the table; the backend's own (the local model's n_ctx) over both
    assert (
        Budget.from_config(_ctx(model_context_window=16_384), model="gpt-4o").max_tokens == 16_384 - reserve
    )
    local = Budget.from_config(_ctx(model_context_window=16_384), 4096, model="gpt-4o")
    assert local.max_tokens == 4096 - reserve and "backend window 4096" in local.source


def test_an_explicit_number_is_a_hard_cap_lowered_only_by_a_known_window():
    assert Budget.from_config(_ctx(max_prompt_tokens=6000), model="gpt-4o").max_tokens == 6000
    assert Budget.from_config(_ctx(max_prompt_tokens=6000), model="my-finetune").max_tokens == 6000
    b = Budget.from_config(_ctx(max_prompt_tokens=60_000), model="llama-3-8b-instruct")
    assert b.max_tokens == 8192 - 1024 and "llama-3-8b-instruct window 8192" in b.source
    assert validate({"context": {"max_prompt_tokens": "3000"}}).context.max_prompt_tokens == 3000
    with pytest.raises(ConfigError):
        validate({"context": {"max_prompt_tokens": "lots"}})
    with pytest.raises(ConfigError):
        validate({"context": {"budget_policy": "lavish"}})


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1-nano", 1_047_576),
        ("o3-mini", 200_000),
        ("anthropic/claude-3-5-sonnet-latest", 200_000),
        ("gemini-2.0-flash", 1_048_576),
        ("meta-llama/Llama-3.1-8B-Instruct", 128_000),
        ("llama3:8b", 8192),
        ("Qwen/Qwen2.5-7B-Instruct", 32_768),
        ("mistral-large-latest", 128_000),
        ("smollm2", 8192),
        ("something-else", None),
    ],
)
def test_known_windows(model, window):
    assert known_window(model) == window


def test_each_role_gets_the_budget_of_its_own_model():
    cfg = validate(
        {
            "llm": {"model": "gpt-4o-mini"},
            "agent": {"feedback": {"model": "llama3:8b"}, "vlm_feedback": {"model": "claude-3-haiku"}},
            "context": {"budget_policy": "full"},
        }
    )
    prompter = Prompter(cfg, None)
    # the answer shares the window: the role's max_tokens is kept free
    # (the code role's is raised for a large window: context.long_answer_tokens, answer_tokens)
    answer = {r: prompter.answer_tokens(r) for r in ("code", "feedback", "vlm_feedback")}
    assert answer["code"] == min(cfg.context.long_answer_tokens, 128_000 // 8) > cfg.role("code").max_tokens
    assert answer["feedback"] == cfg.role("feedback").max_tokens
    assert min(answer.values()) > cfg.context.reserved_output_tokens
    assert prompter.budget_for("code").max_tokens == 128_000 - answer["code"]
    assert prompter.budget_for("feedback").max_tokens == 8192 - answer["feedback"]
    assert (
        f"llama3:8b window 8192 - max_tokens {answer['feedback']}" in prompter.budget_for("feedback").source
    )
    assert prompter.budget_for("vlm_feedback").max_tokens == 200_000 - answer["vlm_feedback"]
    assert prompter.budget is prompter.budget_for("code")
    short = validate({"agent": {"code": {"max_tokens": 512}}, "context": {"budget_policy": "full"}})
    assert (
        Prompter(short, None).budget_for("code").max_tokens == 128_000 - short.context.reserved_output_tokens
    )


def _values(scale: int = 1) -> dict:
    return {
        "task": "# Idea\nMeasure X on Y.",
        "instructions": "Write the code.",
        "response_format": "JSON only.",
        "prior_code": "import numpy as np\n" + "x = np.zeros(3)\n" * 800 * scale,
        "history": "tried lr 0.1, diverged\n" * 400 * scale,
        "plot_feedback": "The curve plateaus after epoch 3. " * 60,
        "node_brief": "Operation: improve",
    }


@pytest.mark.parametrize("n_images", [1, 2, 4])
def test_images_are_reserved_before_the_text_is_packed(n_images):
    counter = counter_for("gpt-4o")
    budget = Budget(7000)
    plain = assemble("phase234_code", _values(), budget, counter)
    p = assemble("phase234_code", _values(), budget, counter, images=[PIXEL] * n_images)
    # counted from the messages as sent, images included (the token counter's own rule)
    sent = messages_tokens(p.messages, counter)
    parts = p.messages[-1]["content"]
    assert sum(1 for x in parts if x.get("type") == "image_url") == n_images
    assert sent == p.tokens <= budget.max_tokens
    text_only = [{**m, "content": [x for x in m["content"] if x.get("type") == "text"]}
                 if isinstance(m["content"], list) else m for m in p.messages]  # fmt: skip
    assert sent - messages_tokens(text_only, counter) == n_images * IMAGE_TOKENS == p.image_tokens
    # the text layers shrank to make room
    assert messages_tokens(text_only, counter) <= budget.max_tokens - n_images * IMAGE_TOKENS
    assert messages_tokens(text_only, counter) < plain.tokens
    ledger = {e["layer"]: e for e in p.ledger}
    assert ledger["images"]["tokens_after"] == n_images * IMAGE_TOKENS
    assert ledger["budget"]["tokens_before"] == budget.max_tokens and ledger["budget"]["tokens_after"] == sent
    # the call's own request (node_brief) stays last, after the images
    assert parts[-1] == {"type": "text", "text": p.sections["node_brief"]}


def test_the_prompt_log_records_the_budget_and_the_tokens_with_images(tmp_path):
    cfg = validate({"llm": {"model": "gpt-4o"}, "context": {"max_prompt_tokens": 6000}})
    backend = ScriptedBackend(lambda messages, schema, ctx: json.dumps({"ok": True}))
    llm = LLMClient(cfg, backend, logger=PromptLogger(tmp_path), cost=CostLedger(None), sleep=lambda s: None)
    ask(
        llm,
        Prompter(cfg, llm),
        "phase234_code",
        _values(2),
        role="vlm_feedback",
        ctx=CallContext(node_id="n0001", phase="phase5_vlm", label="plot_critique"),
        images=[PIXEL] * 3,
    )
    (path,) = sorted((tmp_path / "nodes" / "n0001" / "prompt_logs").glob("*.json"))
    rec = json.loads(path.read_text())
    counter = counter_for(rec["model"])
    assert rec["prompt_tokens_with_images"] == messages_tokens(rec["messages"], counter)
    assert rec["budget"]["limit"] == 6000 and rec["budget"]["source"] == "context.max_prompt_tokens"
    assert rec["prompt_tokens_with_images"] <= rec["budget"]["limit"]
    assert rec["prompt_tokens_with_images"] > 6000 - 200  # the text filled what the images left
