"""Layered assembly: budgets, pinned layers, determinism, ledger, state ops."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_scientist.base.config import Config
from ai_scientist.context import (
    LAYERS,
    PROMPTS,
    Budget,
    ContextAssemblyError,
    ContextBudgetError,
    assemble,
    counter_for,
    next_state,
    state_op_for,
)
from ai_scientist.context.tokens import messages_tokens
from ai_scientist.promptlog.record import PromptLogger

COUNTER = counter_for("gpt-4o-mini")
BASE = {"task": "# Idea\nMeasure X on Y.", "instructions": "Write the code.", "response_format": "JSON only."}


def _ctx(max_tokens=6000, **layers):
    data = {"context": {"max_prompt_tokens": max_tokens, "layers": layers}}
    return Config.model_validate(data).context


def _big_values(scale=1):
    return {
        **BASE,
        "environment": {"os": "Debian 12", "cpus": 2, "libs": [f"lib{i}" for i in range(300 * scale)]},
        "memory": "core: best lr 0.01\n" * 200 * scale,
        "history": ("Debug:\n<think>private musing</think>tried lr 0.1, diverged\n" * 300 * scale),
        "prior_code": "import torch\n" + "x = 1\n" * 2000 * scale,
        "execution_output": json.dumps(
            {"results": [{"loss": i, "log": "z" * 400} for i in range(200 * scale)]}
        ),
        "tried_hyperparams": [{"lr": 10**-i, "acc": 0.5 + i / 100} for i in range(40)],
        "plot_feedback": "The curve plateaus after epoch 3. " * 100,
        "state_op": "append",
        "operation": "debug",
    }


def test_prompt_table_is_declared_in_one_place():
    assert {"phase0_plan", "phase1_install", "phase234_code", "exec_review", "select_tiebreak"} <= set(
        PROMPTS
    )
    for names in PROMPTS.values():
        assert all(n in LAYERS for n in names)
        assert (
            LAYERS[names[0]].role == "system" and LAYERS[names[0]].pinned
        )  # each prompt opens with its persona


def test_messages_are_one_system_and_one_user_with_headed_sections():
    p = assemble("phase0_plan", {**BASE, "environment": "Linux"}, Budget(6000), COUNTER)
    assert [m["role"] for m in p.messages] == ["system", "user"]
    assert "## Environment\nLinux" in p.messages[0]["content"]
    assert p.messages[1]["content"].startswith("## Research idea\n# Idea")
    ledger = {e["layer"]: e for e in p.ledger}
    assert ledger["memory"]["action"] == "dropped" and ledger["memory"]["reason"] == "no content"
    assert ledger["task"]["action"] == "kept" and ledger["task"]["tokens_after"] > 0
    # every layer has an entry, and the budget one says the limit, the tokens used and its source
    assert set(ledger) == set(PROMPTS["phase0_plan"]) | {"budget"}
    assert ledger["budget"]["tokens_before"] == p.limit and ledger["budget"]["tokens_after"] == p.tokens
    assert ledger["budget"]["reason"] == "context.max_prompt_tokens"


def test_missing_required_value_is_a_clear_error():
    with pytest.raises(ContextAssemblyError, match="required layer 'task' needs values\\['task'\\]"):
        assemble("phase0_plan", {"instructions": "x"}, Budget(6000), COUNTER)


def test_overflowing_prompt_is_cut_by_policies_and_ledgered():
    ctx = _ctx(3000)
    p = assemble(
        "phase234_code",
        _big_values(),
        Budget.from_config(ctx),
        COUNTER,
        ctx,
        handles={"execution_output": "n0007/002"},
    )
    assert messages_tokens(p.messages, COUNTER) == p.tokens <= 3000
    ledger = {e["layer"]: e for e in p.ledger}
    assert ledger["execution_output"]["action"] == "previewed"
    assert ledger["execution_output"]["handle"] == "n0007/002"
    assert ledger["history"]["action"] == "truncated" and "state op append" in ledger["history"]["reason"]
    for e in p.ledger:
        if e["layer"] == "budget":  # limit -> tokens used, no text of its own
            assert e["tokens_after"] == p.tokens <= e["tokens_before"] == p.limit
            continue
        assert e["tokens_after"] <= e["tokens_before"] or e["action"] == "dropped"
        if e["action"] not in ("dropped",):
            assert e["chars_after"] > 0
    assert "private musing" not in json.dumps(p.messages)


def test_per_layer_overrides_from_config():
    ctx = _ctx(3000, prior_code={"max_tokens": 300}, history={"priority": 99, "min_tokens": 800})
    p = assemble("phase234_code", _big_values(), Budget.from_config(ctx), COUNTER, ctx)
    ledger = {e["layer"]: e for e in p.ledger}
    assert ledger["prior_code"]["tokens_after"] <= 300
    assert ledger["history"]["tokens_after"] >= 800  # promoted above everything unpinned


@pytest.mark.parametrize("max_tokens", [750, 900, 1000])
def test_lower_priority_dropped_only_after_higher_cut_to_minimum(max_tokens):
    p = assemble("phase234_code", _big_values(), Budget(max_tokens), COUNTER)
    by = {e["layer"]: e for e in p.ledger if e["layer"] in LAYERS}
    dropped = [n for n, e in by.items() if e["action"] == "dropped" and e["reason"] != "no content"]
    assert dropped, "the scenario must force a drop"
    for name in dropped:
        layer = LAYERS[name]
        floor = layer.min_tokens if layer.policy != "none" else by[name]["tokens_before"]
        higher = [o for o, e in by.items() if LAYERS[o].priority > layer.priority and not LAYERS[o].pinned
                  and e["action"] != "dropped"]  # fmt: skip
        # what the more important layers hold beyond their minimums could not have fed this layer's minimum
        mins = {
            o: LAYERS[o].min_tokens if LAYERS[o].policy != "none" else by[o]["tokens_after"] for o in higher
        }
        excess = sum(max(0, by[o]["tokens_after"] - mins[o]) for o in higher)
        assert excess < floor, (name, excess, floor)


def test_pinned_overflow_raises_budget_error():
    with pytest.raises(ContextBudgetError, match="pinned layers"):
        assemble("phase0_plan", {**BASE, "instructions": "do this. " * 2000}, Budget(300), COUNTER)


text_st = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=3000)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prompt=st.sampled_from(["phase0_plan", "phase1_install", "phase234_code", "exec_review"]),
    max_tokens=st.integers(700, 5000),
    task=st.text(min_size=1, max_size=600),
    sizes=st.dictionaries(
        st.sampled_from(
            [
                "environment",
                "memory",
                "resource_index",
                "history",
                "prior_code",
                "execution_output",
                "plan_snippet",
                "plot_feedback",
                "prior_outputs",
            ]
        ),
        st.integers(0, 40_000),
    ),  # fmt: skip
    filler=text_st,
    steps=st.integers(0, 40),
)
def test_property_budget_pinned_determinism(prompt, max_tokens, task, sizes, filler, steps):
    filler = filler or "abc "
    values = {**BASE, "task": task}
    for name, n in sizes.items():
        values[name] = (filler * (n // len(filler) + 1))[:n]
    values["install_steps"] = [{"cmd": f"step {i}", "out": filler[:200]} for i in range(steps)]
    budget = Budget(max_tokens)
    p = assemble(prompt, values, budget, COUNTER)
    # 1. never over budget (counted independently, framing included)
    assert messages_tokens(p.messages, COUNTER) <= max_tokens
    # 2. pinned layers always present, as a section of the messages
    for e in p.ledger:
        if e["layer"] in LAYERS and LAYERS[e["layer"]].pinned:
            assert e["action"] != "dropped" and e["layer"] in p.sections
    # 3. byte-identical output for identical inputs
    q = assemble(prompt, json.loads(json.dumps(values)), budget, COUNTER)
    assert json.dumps(q.messages).encode() == json.dumps(p.messages).encode()
    assert q.ledger == p.ledger


def test_conversation_pruned_keeps_tool_pairs_and_strips_thinking(tmp_path):
    conv = []
    for i in range(30):
        conv.append({"role": "assistant", "content": f"<think>secret {i}</think>step {i}", "reasoning_content": "rc",
                     "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "sh", "arguments": "{}"}}]})  # fmt: skip
        conv.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"result {i} " + "x" * 300})
    # memory read rounds re-assemble the asking prompt with the conversation so far
    p = assemble("metrics_parse", BASE, Budget(2000), COUNTER, conversation=conv)
    sent = json.dumps(p.messages)
    assert "secret" not in sent and "reasoning_content" not in sent
    tail = p.messages[2:]
    assert tail and tail[-1]["content"].startswith("result 29")
    ids = [m["tool_call_id"] for m in tail if m["role"] == "tool"]
    assert ids == [m["tool_calls"][0]["id"] for m in tail if m["role"] == "assistant"]
    assert messages_tokens(p.messages, COUNTER) <= 2000
    entry = next(e for e in p.ledger if e["layer"] == "conversation")
    assert entry["action"] == "truncated" and "oldest turns" in entry["reason"]
    # the raw response (with thinking) lives in the prompt log of the call that produced it
    rec = PromptLogger(tmp_path).write({"node_id": "n0001", "phase": "p", "label": "l", "messages": p.messages,
                                         "ledger": p.ledger, "response": {"raw": conv[0]["content"], "context": "step 0"}})  # fmt: skip
    logged = json.loads(open(rec["path"]).read())
    assert "secret 0" in logged["response"]["raw"] and "secret" not in json.dumps(logged["messages"])


def test_stripped_thinking_never_reaches_a_later_prompt_but_stays_in_the_log(tmp_path):
    logger = PromptLogger(tmp_path)
    raw = "<thinking>the hidden key is 4242</thinking>Plan: use lr 0.01"
    first = assemble("phase0_plan", BASE, Budget(4000), COUNTER)
    logger.write({"node_id": "n0001", "phase": "phase0", "label": "plan", "messages": first.messages,
                  "ledger": first.ledger, "response": {"raw": raw, "context": "Plan: use lr 0.01"}})  # fmt: skip
    state, op = next_state("", "draft", raw)
    later = assemble("phase0_plan", {**BASE, "history": state, "prior_outputs": raw}, Budget(4000), COUNTER)
    assert "4242" not in json.dumps(later.messages)
    assert "use lr 0.01" in json.dumps(later.messages)
    kinds = {e["layer"]: e["action"] for e in later.ledger}
    assert kinds["prior_outputs"] == "stripped"
    logs = list((tmp_path / "nodes" / "n0001" / "prompt_logs").glob("*.json"))
    assert "4242" in logs[0].read_text()


def test_state_ops_and_next_state():
    assert [state_op_for(o) for o in ("draft", "debug", "improve", "tune", "ablate", "seed_eval")] == [
        "replace", "append", "replace", "append", "append", "append",
    ]  # fmt: skip
    s1, op1 = next_state(None, "draft", "first model")
    s2, op2 = next_state(s1, "debug", "<think>hmm</think>fixed the shape bug")
    s3, op3 = next_state(s2, "improve", "switched to AdamW; acc 0.91")
    assert op2 == "append" and s2.startswith(s1.rstrip()) and "fixed the shape bug" in s2 and "hmm" not in s2
    assert op3 == "replace" and "first model" not in s3 and "AdamW" in s3
    with pytest.raises(ValueError, match="unknown node operation"):
        state_op_for("explode")


def test_templates_are_strict_and_the_prompt_dir_is_overridable(tmp_path, monkeypatch):
    from ai_scientist.context import TemplateError, render

    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "system.j2").write_text("Hello {{ who_is_this }}")
    monkeypatch.setenv("AI_SCIENTIST_PROMPT_DIR", str(tmp_path))
    with pytest.raises(TemplateError, match="core/system.j2.*who_is_this"):
        render("core/system.j2")
    assert render("core/system.j2", who_is_this="lab") == "Hello lab"
    with pytest.raises(TemplateError, match="not found"):
        render("context/nope.j2")
