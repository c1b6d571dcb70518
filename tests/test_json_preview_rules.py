"""JSON preview rules (issue 28): a list never shows zero items while it has some, repeated
structures are shown once with a count, strings are cut where it matters least."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_scientist.context import Budget, assemble, counter_for
from ai_scientist.context.json_preview import PreviewParams, preview_json, preview_ladder
from ai_scientist.context.policies import PolicyParams, get_layer_policy


def _is_marker(x) -> bool:
    return isinstance(x, str) and x.startswith("... ") and x.endswith(" ...")


def _lists(node, path="$"):
    """(path, preview list) of every list in a preview body."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k != "_preview":
                yield from _lists(v, f"{path}.{k}")
    elif isinstance(node, list):
        yield path, node
        for i, x in enumerate(node):
            yield from _lists(x, f"{path}[{i}]")


KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=6)
leaf = st.one_of(st.none(), st.integers(), st.text(max_size=120))
value = st.recursive(
    leaf,
    lambda kids: st.one_of(st.lists(kids, max_size=10), st.dictionaries(KEYS, kids, max_size=5)),
    max_leaves=50,
)


@settings(max_examples=50, deadline=None)
@given(data=st.dictionaries(KEYS, value, min_size=1, max_size=6), head=st.integers(0, 3))
def test_no_rung_of_the_ladder_shows_a_non_empty_list_with_no_item(data, head):
    for p in preview_ladder(PreviewParams(list_head=head, string_cap=40)):
        body = json.loads(preview_json(data, p, "h"))
        for path, shown in _lists(body):
            if shown:
                assert any(not _is_marker(x) for x in shown), (p, path, shown)


def test_the_issue_payload_keeps_an_item_of_every_list_under_pressure():
    payload = {
        "outputs": [f"figure_{i}.png written ({i * 1000} bytes)" for i in range(3)],
        "data_files": [
            {"name": f"run{i}/results.json", "bytes": 1200 + i, "keys": ["loss", "acc"]} for i in range(5)
        ],
        "stdout": "epoch 1 loss 0.9\n" * 400 + "FINAL val_accuracy=0.9132\n",
    }
    text = json.dumps(payload)
    for room in (700, 900, 1400):
        out, _ = get_layer_policy("json_preview").shrink(
            text, lambda c, r=room: len(c) <= r, PolicyParams(), "h"
        )
        body = json.loads(out)
        assert any(not _is_marker(x) for x in body["outputs"]), (room, body["outputs"])
        assert any(not _is_marker(x) for x in body["data_files"]), (room, body["data_files"])
        assert "items omitted (3 total)" not in out or len(body["outputs"]) > 1
        assert body["stdout"].endswith("FINAL val_accuracy=0.9132\n")  # a log keeps its end


def test_repeated_structures_are_shown_once_with_a_count():
    p = PreviewParams(list_head=2, string_cap=200)
    same = [{"name": "lr", "value": 0.1, "note": "grid"}] * 12
    body = json.loads(preview_json({"rows": same}, p))
    assert body["rows"] == [same[0], "... 12 x the item above: all identical (12 total) ..."]
    # records with the same keys: the usual first k + last, the marker names their shape once
    records = [{"epoch": i, "loss": 1 / (i + 1)} for i in range(12)]
    body = json.loads(preview_json({"curve": records}, p))
    assert body["curve"] == [
        *records[:2],
        "... 12 x {epoch, loss}: 9 more items with these keys omitted (12 total) ...",
        records[-1],
    ]
    assert body["_preview"]["list_totals"] == {"$.curve": 12}
    # a short list is shown whole, whatever its shape
    assert json.loads(preview_json({"curve": records[:3]}, p))["curve"] == records[:3]
    # a list of different shapes keeps the head + last rule
    mixed = [{"a": i} if i % 2 else {"b": i} for i in range(6)]
    assert json.loads(preview_json({"m": mixed}, p))["m"] == [
        {"b": 0}, {"a": 1}, "... 3 more items omitted (6 total) ...", {"a": 5}
    ]  # fmt: skip


def test_strings_are_cut_at_the_end_unless_their_end_matters():
    p = PreviewParams(list_head=2, string_cap=30)
    desc = "A long description of the experiment: " + "x" * 100
    body = json.loads(preview_json({"description": desc, "stderr": "start " + "y" * 100 + " ValueError"}, p))
    assert body["description"] == desc[:30] + f" [... {len(desc) - 30} more chars cut]"
    assert body["stderr"].startswith("start ") and body["stderr"].endswith(" ValueError")


def test_a_json_value_the_budget_has_room_for_is_not_previewed():
    """The preview threshold follows the budget: a 10 kB manifest is shown whole in a 32k-token
    prompt (the issue's aggregation prompt saw 2 of its 6 nodes) and previewed in a 2k one."""
    nodes = [
        {"node_id": f"n{i:04d}", "files": [f"data/n{i:04d}/results.json"], "note": "x" * 1500}
        for i in range(6)
    ]
    manifest = {"data_root": "data", "nodes": nodes}
    values = {"manifest": manifest, "max_figures": 4, "instructions": "Plot.", "response_format": "JSON."}
    assert 5000 < len(json.dumps(manifest, indent=2)) < 32000
    counter = counter_for("gpt-4o")
    wide = assemble("plot_aggregate", values, Budget(32_000), counter)
    entry = next(e for e in wide.ledger if e["layer"] == "manifest")
    assert entry["action"] == "kept" and all(n["node_id"] in wide.sections["manifest"] for n in nodes)
    narrow = assemble("plot_aggregate", values, Budget(2_500), counter)
    entry = next(e for e in narrow.ledger if e["layer"] == "manifest")
    assert entry["action"] == "previewed" and narrow.tokens <= 2_500


def test_the_calls_own_payload_is_previewed_only_when_it_nears_the_budget():
    """A pinned, required JSON layer (the aggregation's manifest) is the call's content: previewed
    ahead of packing only past three quarters of the budget, not a quarter (a relay run's 29 kB
    manifest, about 8k tokens of a 32k budget, was previewed and lost 3 of its 6 nodes)."""
    nodes = [
        {"node_id": f"n{i:04d}", "files": [f"data/n{i:04d}/results.json"], "note": "x " * 2500}
        for i in range(8)
    ]
    manifest = {"data_root": "data", "nodes": nodes}
    values = {"manifest": manifest, "max_figures": 4, "instructions": "Plot.", "response_format": "JSON."}
    counter = counter_for("gpt-4o")
    budget = Budget(32_000)
    text = len(json.dumps(manifest))
    assert budget.limit_for(counter) < text < 3 * budget.limit_for(counter)  # past a quarter's worth
    wide = assemble("plot_aggregate", values, budget, counter)
    entry = next(e for e in wide.ledger if e["layer"] == "manifest")
    assert entry["action"] == "kept" and all(n["node_id"] in wide.sections["manifest"] for n in nodes)
    assert wide.tokens <= 32_000
