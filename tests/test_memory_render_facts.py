"""Memory is never cut mid-fact (issue 28): whole entries, events and hits are dropped, headers are
true of what is shown, and the prompt's memory layer (policy ``whole_items``) shrinks the same way."""

from __future__ import annotations

import re

from ai_scientist.base.config import Config, MemoryConfig
from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.context.policies import PolicyParams, get_layer_policy
from ai_scientist.memory import MemoryStore, render_memory
from ai_scientist.memory.render import _cap

COUNTER = counter_for("gpt-4o-mini")
FACT = re.compile(r"^- (\S+) = (.*) \(importance (\d)\)$")


def _store(tmp_path, **cfg) -> MemoryStore:
    s = MemoryStore(tmp_path / "memory.sqlite", MemoryConfig(**cfg))
    s.fork(None, "n0001")
    return s


def _facts(s: MemoryStore, n: int = 12) -> dict[str, str]:
    facts = {}
    for i in range(n):
        key, value = f"results.run{i:02d}", f"paired L2 gain +0.000{i}31 (95% CI +0.0001..+0.0009), seed {i}"
        s.core_set("n0001", key, value, importance=1 + i % 5)
        facts[key] = value
    return facts


def _shown_facts(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := FACT.match(line))}


def _check_whole(text: str, facts: dict[str, str]) -> dict[str, str]:
    shown = _shown_facts(text)
    for key, value in shown.items():
        assert facts[key] == value  # every fact shown is the whole fact
    # no fact line was cut: each "- results.*" line is a complete fact line
    partial = [ln for ln in text.splitlines() if ln.startswith("- results.") and not FACT.match(ln)]
    assert not partial, partial
    assert "more characters cut" not in text and "…[cut" not in text
    return shown


def test_a_small_budget_drops_whole_facts_and_the_headers_say_how_many_are_shown(tmp_path):
    s = _store(tmp_path, memory_budget_chars=700, core_max_chars=4000)
    facts = _facts(s)
    view = render_memory(s, "n0001", "")
    assert len(view.text) <= 700
    shown = _check_whole(view.text, facts)
    assert 0 < len(shown) < len(facts)
    used = sum(len(k) + len(v) for k, v in facts.items())
    # the header counts what is stored and says how many entries are shown: both true
    assert f"### Core memory ({used}/4000 chars; {len(shown)} of {len(facts)} entries shown)" in view.text
    assert f"[results] {used}/4000 chars; {len(shown)} of {len(facts)} entries shown" in view.text
    # the most important entries are the ones kept; the rest are named by key
    importance = {f"results.run{i:02d}": 1 + i % 5 for i in range(len(facts))}
    assert min(importance[k] for k in shown) >= max(importance[k] for k in facts if k not in shown)
    line = next(ln for ln in view.text.splitlines() if ln.startswith("["))
    assert line.startswith("[results]")
    not_shown = next(ln for ln in view.text.splitlines() if "more not shown" in ln)
    assert not_shown.startswith(f"[{len(facts) - len(shown)} more not shown; keys results.run")
    assert {c["key"] for c in view.snapshot["core"]} == set(shown)


def test_all_facts_fit_then_the_header_is_the_plain_count(tmp_path):
    s = _store(tmp_path, memory_budget_chars=6000, core_max_chars=4000)
    facts = _facts(s, 3)
    view = render_memory(s, "n0001", "")
    assert _check_whole(view.text, facts) == facts
    used = sum(len(k) + len(v) for k, v in facts.items())
    assert f"### Core memory ({used}/4000 chars)\n" in view.text and "shown" not in view.text


def test_a_long_event_is_cut_at_a_word_boundary_never_inside_a_number():
    text = "run 7: paired L2 gain +0.000312 on 5 seeds; baseline +0.000101. " * 6
    for limit in range(60, 300, 7):
        out = _cap(text, limit, "r7")
        assert len(out) <= limit and out.endswith(" …[cut; expand r7]")
        kept = out.removesuffix(" …[cut; expand r7]")
        assert text.startswith(kept)
        assert text[len(kept)] in " .;,\n" or text[len(kept) - 1] in ".;,"  # ends on a boundary


def test_the_memory_layer_shrinks_by_whole_items_in_a_prompt(tmp_path):
    s = _store(tmp_path, memory_budget_chars=6000, core_max_chars=6000)
    facts = _facts(s, 30)
    for i in range(10):
        s.recall_append("n0001", "metric", f"epoch {i}: val_loss={1 / (i + 1):.6f}")
    view = render_memory(s, "n0001", "")
    full = view.text
    assert len(full) > 2000
    cfg = Config.model_validate(
        {"context": {"max_prompt_tokens": 900, "layers": {"memory": {"policy": "whole_items"}}}}
    ).context
    values = {"task": "# Idea\nMeasure X.", "instructions": "Write the code.", "memory": view.text}
    p = assemble("phase234_code", values, Budget.from_config(cfg), COUNTER, cfg)
    entry = next(e for e in p.ledger if e["layer"] == "memory")
    assert entry["action"] == "truncated" and entry["policy"] == "whole_items"
    section = p.sections["memory"]
    shown = _check_whole(section, facts)
    assert 0 < len(shown) < len(facts)
    assert f"{len(shown)} of {len(facts)} entries shown" in section
    # every line of the section is a whole line of the full render or a header/count line
    full_lines = set(full.splitlines())
    for ln in section.splitlines()[1:]:
        assert ln in full_lines or "shown" in ln or ln == "", ln


def test_whole_items_on_plain_text_keeps_whole_lines():
    text = "\n".join(f"- fact {i} = value {i}.123456" for i in range(50))
    out, note = get_layer_policy("whole_items").shrink(text, lambda c: len(c) <= 300, PolicyParams(), None)
    lines = out.splitlines()
    assert lines[-1].startswith("[... ") and lines[-1].endswith(" more items not shown ...]")
    assert all(ln in text.splitlines() for ln in lines[:-1]) and len(out) <= 300
    assert note == f"first {len(lines) - 1} of 50 whole items kept"
