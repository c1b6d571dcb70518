"""The <memory_update> protocol: tolerant parsing, precise errors, bounded read rounds, never raising."""

from __future__ import annotations

import pytest

from ai_scientist.memory import (
    MemoryStore,
    apply_updates,
    handle_response,
    parse_memory_update,
    strip_memory_blocks,
)
from ai_scientist.memory.protocol import MemoryOp, protocol_instructions

OK = '{"op": "core_set", "key": "lr", "value": "0.01"}'

# (response text, expected op names) — every one of these must parse
TOLERATED = [
    (f"<memory_update>[{OK}]</memory_update>", ["core_set"]),
    (f'<memory_update version="1" mode=x>[{OK}]</memory_update>', ["core_set"]),  # attributes
    (f"<memory_update>\n```json\n[{OK}]\n```\n</memory_update>", ["core_set"]),  # fence inside
    (f"```xml\n<memory_update>[{OK}]</memory_update>\n```\nplan", ["core_set"]),  # fence outside
    (f"<memory_update>{OK}</memory_update>", ["core_set"]),  # single op, not a list
    (f"<memory_update>[{OK}] I also think this is good.</memory_update>", ["core_set"]),  # trailing text
    (f"<memory_update>[{OK},]</memory_update>", ["core_set"]),  # trailing comma
    (
        "<memory_update>[{'op': 'core_set', 'key': 'a', 'value': 'b', 'importance': 2}]</memory_update>",
        ["core_set"],
    ),
    (
        '<MEMORY_UPDATE>{"ops": [{"op": "core.get", "key": "a"}]}</MEMORY_UPDATE>',
        ["core_get"],
    ),  # case, wrapper
    ('<memory_update>{"core_set": {"key": "a", "value": "b"}}</memory_update>', ["core_set"]),  # op-keyed
    (
        '<memory_update>{"core": {"a": "1", "b": "2"}, "archival": ["lesson"]}</memory_update>',
        ["core_set", "core_set", "archival_write"],
    ),  # section form
    (
        '<memory_update>[{"action": "archival-insert", "content": "x"}]</memory_update>',
        ["archival_write"],
    ),  # aliases
    ('<memory_update>[{"op": "recall_evict", "id": "r3"}]</memory_update>', ["recall_evict"]),
    ('<memory_update>[{"op": "core_set", "key": "cfg", "value": {"a": 1}}]</memory_update>', ["core_set"]),
    (
        f"<memory_update>[{OK}]</memory_update> text <memory_update>[{OK}]</memory_update>",
        ["core_set", "core_set"],
    ),
]

# (response text, substring the precise error must contain)
MALFORMED = [
    ("<memory_update></memory_update>", "empty"),
    ("<memory_update>just words</memory_update>", "no JSON"),
    ('<memory_update>[{"op": "core_set", "key": "a" "value": "b"}]</memory_update>', "line 1 column"),
    ('<memory_update>[{"op": "core_set", "key": "a", "value": "b"</memory_update>', "invalid JSON"),
    ('<memory_update>[{"key": "a", "value": "b"}]</memory_update>', 'missing "op"'),
    ('<memory_update>[{"op": "teleport"}]</memory_update>', "unknown op 'teleport'"),
    ('<memory_update>[{"op": "core_set", "value": "b"}]</memory_update>', "missing field 'key'"),
    ('<memory_update>[{"op": "core_set", "key": "a"}]</memory_update>', "missing field 'value'"),
    (
        '<memory_update>[{"op": "core_set", "key": "a", "value": "b", "importance": 9}]</memory_update>',
        "1..5",
    ),
    (
        '<memory_update>[{"op": "core_set", "key": "a", "value": "b", "importance": "high"}]</memory_update>',
        "must be a number",
    ),
    (
        '<memory_update>[{"op": "core_set", "key": "a", "value": "b", "ttl": -5}]</memory_update>',
        "must be > 0",
    ),
    ('<memory_update>[{"op": "archival_search", "query": "x", "k": 0}]</memory_update>', "must be > 0"),
    ('<memory_update>["core_set a=b"]</memory_update>', "must be a JSON object"),
    ("<memory_update>[]</memory_update>", "operation list is empty"),
    ('<memory_update>[{"op": "archival_write"}]</memory_update>', "missing field 'text'"),
    ('<memory_update>[{"op": "core_delete", "key": {"a": 1}}]</memory_update>', "must be a string"),
    (f"<memory_update>[{OK}]", "missing closing tag"),
    ('<memory_update>[{"op": "core_get"}]</memory_update>', "missing field 'key'"),
    ('<memory_update>{"op": "expand"}</memory_update>', "missing field 'id'"),
    ('<memory_update>[{"op": "archival_update", "text": "x"}]</memory_update>', "missing field 'id'"),
    ('<memory_update>{"core_set": 5}</memory_update>', "bare value"),
    ('<memory_update>[{"op": "recall_search"}]</memory_update>', "missing field 'query'"),
    ("<memory_update>[1, 2]</memory_update>", "must be a JSON object"),
    ('<memory_update>[{"op": null, "key": "a"}]</memory_update>', 'missing "op"'),
]


@pytest.mark.parametrize(("text", "ops"), TOLERATED)
def test_tolerated_forms_parse(text, ops):
    pr = parse_memory_update(text)
    assert pr.found and pr.ok, pr.error
    assert [o.op for o in pr.ops] == ops


@pytest.mark.parametrize(("text", "needle"), MALFORMED)
def test_malformed_blocks_give_precise_errors(text, needle):
    pr = parse_memory_update(text)
    assert pr.found and not pr.ok
    assert needle in pr.error, pr.error
    assert pr.error.startswith("block ")  # says where


def test_no_block_is_not_an_error():
    pr = parse_memory_update('{"plan": "x"}')
    assert not pr.found and pr.ok and pr.ops == []


def test_strip_memory_blocks_leaves_the_answer():
    text = f'```json\n<memory_update a=1>[{OK}]</memory_update>\n```\n{{"plan": 1}}<memory_results>x</memory_results>'
    assert strip_memory_blocks(text) == '{"plan": 1}'


@pytest.fixture
def store(tmp_path):
    s = MemoryStore(tmp_path / "m.sqlite")
    s.fork(None, "n1")
    yield s
    s.close()


def test_apply_writes_and_reads(store):
    ops = parse_memory_update(
        '<memory_update>[{"op":"core_set","key":"lr","value":"0.01","importance":4},'
        '{"op":"archival_write","text":"adam beats sgd here","tags":["opt"]},'
        '{"op":"core_get","key":"lr"},{"op":"archival_search","query":"adam sgd"},'
        '{"op":"expand","id":"a999"}]</memory_update>'
    ).ops
    res = apply_updates(store, "n1", ops, max_read_rounds=1)
    assert [r.ok for r in res.results] == [True, True, True, True, False]
    assert res.results[2].result == {"lr": "0.01"}
    assert res.results[3].result[0]["text"] == "adam beats sgd here"
    assert "KeyError" in res.results[4].error
    block = res.results_block()
    assert block.startswith("<memory_results>") and "adam beats sgd" in block and "a999" in block


def test_reads_not_served_past_the_round_limit(store):
    ops = [MemoryOp("core_set", {"key": "a", "value": "1"}), MemoryOp("core_get", {"key": "a"})]
    res = apply_updates(store, "n1", ops, max_read_rounds=1, read_round=1)
    assert res.results[0].ok and not res.results[1].ok and "exhausted" in res.results[1].error
    assert not res.reads_served
    assert store.core_get("n1", "a").value == "1"  # writes still apply


def test_read_rounds_are_bounded(store):
    greedy = '<memory_update>[{"op":"archival_search","query":"anything"}]</memory_update>{"plan": 1}'
    asked = []

    def ask(text):
        asked.append(text)
        return greedy  # the model keeps asking for more reads

    ex = handle_response(store, "n1", greedy, ask, max_read_rounds=2)
    assert len(asked) == 2 and ex.extra_calls == 2
    assert all(a.startswith("<memory_results>") for a in asked)
    assert ex.final_text == '{"plan": 1}'
    assert any("exhausted" in e for e in ex.errors)


def test_zero_read_rounds_means_no_follow_up(store):
    ex = handle_response(
        store, "n1", '<memory_update>{"op":"core_get","key":"x"}</memory_update>ok', lambda t: 1 / 0, 0
    )
    assert ex.extra_calls == 0 and ex.final_text == "ok"


def test_invalid_block_is_reasked_once_with_the_precise_error(store):
    prompts = []

    def ask(text):
        prompts.append(text)
        return f"<memory_update>[{OK}]</memory_update>answer"

    ex = handle_response(store, "n1", '<memory_update>[{"op": "teleport"}]</memory_update>first', ask)
    assert len(prompts) == 1 and "unknown op 'teleport'" in prompts[0]
    assert ex.final_text == "answer" and ex.errors == []
    assert store.core_get("n1", "lr").value == "0.01"


def test_second_invalid_block_is_recorded_not_reasked(store):
    calls = []
    bad = '<memory_update>[{"op":"core_set","key":"k","value":"v"},{"op":"nope"}]</memory_update>x'
    ex = handle_response(store, "n1", bad, lambda t: calls.append(t) or bad)
    assert len(calls) == 1
    assert any("unknown op 'nope'" in e for e in ex.errors)
    assert store.core_get("n1", "k").value == "v"  # the valid op of the last attempt applied


def test_nothing_raises_into_the_caller(store):
    ex = handle_response(store, "ghost-branch", f"<memory_update>[{OK}]</memory_update>x", lambda t: "y")
    assert ex.final_text == "x" and any("unknown memory branch" in e for e in ex.errors)

    def boom(text):
        raise TimeoutError("LLM down")

    ex = handle_response(store, "n1", '<memory_update>[{"op":"teleport"}]</memory_update>z', boom)
    assert ex.final_text == "z" and any("LLM down" in e for e in ex.errors)


def test_protocol_instructions_use_config_limits(store):
    text = protocol_instructions(store.cfg)
    assert "<memory_update>" in text and str(store.cfg.core_max_chars) in text
