"""Truncation policies: tail window, JSON preview, history pruning, reasoning stripping."""

from __future__ import annotations

import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ai_scientist.context import PolicyParams, PreviewParams, get_layer_policy, preview_json, strip_reasoning
from ai_scientist.context.history import orphaned_tool_results, prune_messages
from ai_scientist.context.json_preview import minimal_preview, parse_json, preview_ladder
from ai_scientist.context.policies import LAYER_POLICIES, JSONPreview
from ai_scientist.context.reasoning import strip_value

PARAMS = PolicyParams()


def test_tail_window_keeps_the_end_and_says_how_much_was_cut():
    text = "".join(f"line {i}\n" for i in range(2000))
    out, note = get_layer_policy("tail").prepare(text, PolicyParams(tail_window_chars=500), None)
    assert out.endswith("line 1999\n")
    m = re.match(r"\[\.\.\. (\d+) earlier characters cut; last (\d+) kept \.\.\.\]\n", out)
    assert m and int(m.group(1)) + int(m.group(2)) == len(text)
    assert "500" in note


def test_every_policy_is_registered_by_name():
    assert {"none", "tail", "head", "head_tail", "json_preview", "history_prune", "strip_reasoning"} <= set(
        LAYER_POLICIES
    )


KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=8)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=300))
json_value = st.recursive(
    json_leaf,
    lambda kids: st.one_of(st.lists(kids, max_size=12), st.dictionaries(KEYS, kids, max_size=6)),
    max_leaves=60,
)


def _at(node, path):
    """Resolve a preview path like ``$.a[3].b`` in the original data."""
    for key, index in re.findall(r"\.([a-z_]+)|\[(\d+)\]", path[1:]):
        node = node[key] if key else node[int(index)]
    return node


@settings(max_examples=150, deadline=None)
@given(data=st.one_of(st.lists(json_value, max_size=15), st.dictionaries(KEYS, json_value, max_size=8)),
       head=st.integers(0, 3), cap=st.integers(20, 80))  # fmt: skip
def test_json_preview_always_parses_and_keeps_counts(data, head, cap):
    out = preview_json(data, PreviewParams(list_head=head, string_cap=cap), handle="n0001/004")
    parsed = json.loads(out)  # always valid JSON
    meta = parsed["_preview"]
    assert meta["handle"] == "n0001/004"
    totals = meta["list_totals"]
    body = parsed if isinstance(data, dict) and "_preview" not in data else parsed["data"]
    for path, total in totals.items():
        assert total == len(_at(data, path))  # every shortened list reports its true total

    def shortened(shown: list, original: list) -> None:
        # one marker with the true total, and never zero items shown while there are some: the
        # first k + marker + last, or for repeated structures one or two items and a count
        markers = [x for x in shown if isinstance(x, str) and f"({len(original)} total)" in x]
        assert len(markers) == 1, shown
        assert 2 <= len(shown) <= max(head, 1) + 2
        if len(shown) == head + 2 and " x " not in markers[0]:
            assert shown.index(markers[0]) == head  # first k, marker, LAST item

    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and len(value) > max(head, 8) + 1:
                assert totals[f"$.{key}"] == len(value)
                if key not in ("metadata", "sources"):
                    shortened(body[key], value)
    if isinstance(data, list) and len(data) > head + 1:
        assert totals["$"] == len(data)
        shortened(body, data)


def test_json_preview_keeps_last_item_metadata_and_nested_lists():
    payload = {
        "status": "success",
        "results": [{"title": f"t{i}", "content": "x" * 5000, "tags": list(range(50))} for i in range(23)],
        "metadata": {"freshness": "2 days", "confidence": 0.8, "sources": [f"s{i}" for i in range(6)]},
    }
    text = json.dumps(payload)
    out, note = get_layer_policy("json_preview").prepare(text, PARAMS, "n0002/001")
    p = json.loads(out)
    assert p["status"] == "success"
    assert p["metadata"] == payload["metadata"]  # metadata kept whole
    assert p["_preview"]["list_totals"]["$.results"] == 23
    assert p["results"][-1]["title"] == "t22"  # the LAST item survives
    assert p["_preview"]["list_totals"]["$.results[0].tags"] == 50  # lists at any depth
    assert p["results"][0]["tags"][-1] == 49
    assert len(p["results"][0]["content"]) < 600
    assert p["_preview"]["handle"] == "n0002/001" and p["_preview"]["original_chars"] == len(text)
    assert len(out) < len(text) / 20


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), budget=st.integers(40, 2000))
# always run: a preview with rows fits (a shrink that always refuses fails here), only the
# shape fits, and nothing fits
@example(n=23, budget=2000)
@example(n=60, budget=300)
@example(n=1, budget=40)
def test_json_shrink_output_parses_or_refuses(n, budget):
    data = {"rows": [{"i": i, "text": "word " * 40} for i in range(n)], "confidence": 0.5}

    def fits(candidate):
        return len(candidate) <= budget

    text = json.dumps(data)
    res = get_layer_policy("json_preview").shrink(text, fits, PARAMS, "h")
    # it refuses only when not even the smallest preview (shape and handle) fits
    assert (res is None) == (len(minimal_preview(data, "h", len(text))) > budget)
    if res is not None:
        out = res[0]
        assert len(out) <= budget
        parsed = parse_json(out)
        assert parsed is not None and parsed["_preview"]["handle"] == "h"
        # never zero rows while a preview with one row fits
        smallest = preview_json(data, preview_ladder(JSONPreview._params(PARAMS))[-1], "h", len(text))
        if len(smallest) <= budget:
            # (an item itself, or past the depth limit the item in outline: its keys)
            assert any(
                (isinstance(r, dict) and "i" in r) or str(r).startswith("{... object with keys i, text")
                for r in parsed["rows"]
            ), out


def test_plain_text_output_falls_back_to_head_and_tail():
    text = "START\n" + "noise\n" * 3000 + "Traceback: ValueError at the end\n"
    out, _ = get_layer_policy("json_preview").prepare(text, PARAMS, None)
    assert out.startswith("START") and out.rstrip().endswith("ValueError at the end")
    assert "characters cut from the middle" in out


def _conversation(draw_turns):
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "question"}]
    for i, kind in enumerate(draw_turns):
        if kind == "tool":
            calls = [{"id": f"c{i}_{j}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
                     for j in range(1 + i % 2)]  # fmt: skip
            msgs.append({"role": "assistant", "content": "", "tool_calls": calls})
            msgs += [{"role": "tool", "tool_call_id": c["id"], "content": f"out {c['id']}"} for c in calls]
        elif kind == "user":
            msgs.append({"role": "assistant", "content": f"answer {i}"})
            msgs.append({"role": "user", "content": f"follow-up {i}"})
        else:
            msgs.append({"role": "assistant", "content": f"note {i}"})
    return msgs


@settings(max_examples=150, deadline=None)
@given(turns=st.lists(st.sampled_from(["tool", "user", "plain"]), max_size=30),
       keep=st.integers(0, 10), cap=st.integers(2, 40))  # fmt: skip
def test_history_pruning_never_orphans_a_tool_result(turns, keep, cap):
    msgs = _conversation(turns)
    out, dropped = prune_messages(msgs, keep, fits=lambda m: len(m) <= cap)
    assert out[:2] == msgs[:2]  # system prompt and first user message always kept
    assert orphaned_tool_results(out) == []
    called = {c["id"] for m in out for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in out if m["role"] == "tool"}
    assert called == answered  # no call left without its result either
    assert out[2:] == msgs[len(msgs) - (len(out) - 2) :]  # a suffix: the most recent turns


def test_history_prune_policy_on_step_lists():
    steps = [{"command": f"pip install p{i}", "exit_code": i % 2} for i in range(20)]
    out, note = get_layer_policy("history_prune").prepare(steps, PolicyParams(history_keep_turns=3), None)
    assert out[0] == steps[0] and out[-3:] == steps[-3:]
    assert "16 earlier steps omitted (20 total)" in out[1]


def test_reasoning_stripping_variants():
    assert strip_reasoning("<think>a</think>answer") == ("answer", "a")
    assert strip_reasoning("<THINKING type='x'>plan\n</THINKING>\nok") == ("ok", "plan")
    assert strip_reasoning("done <think>ran out of tok") == ("done", "ran out of tok")
    assert strip_reasoning("pre-opened thoughts</think>final") == ("final", "pre-opened thoughts")
    assert strip_reasoning("no thinking here") == ("no thinking here", "")
    val, removed = strip_value([{"content": "<think>x</think>y", "reasoning_content": "zz"}])
    assert val == [{"content": "y"}] and removed > 0


def test_json_preview_keeps_both_ends_of_long_strings():
    record = {"exit_code": 1, "stdout": "epoch 1 ok\n" * 500 + "Traceback: CUDA out of memory\n"}
    p = json.loads(preview_json(record, PreviewParams(string_cap=120)))
    assert p["exit_code"] == 1
    assert p["stdout"].startswith("epoch 1 ok") and p["stdout"].endswith("CUDA out of memory\n")
    assert "chars cut" in p["stdout"] and len(p["stdout"]) < 200


def test_the_configs_policy_names_are_the_registered_policies():
    from ai_scientist.base.config import LAYER_POLICY_NAMES
    from ai_scientist.context.policies import LAYER_POLICIES

    assert sorted(LAYER_POLICY_NAMES) == sorted(LAYER_POLICIES)
