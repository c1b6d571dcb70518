"""The <memory_update> protocol, rule by rule: exact issues, every alias and shape, field
coercion bounds, the arguments each op passes to the store, and the re-ask / read-round loop.

A recording store stands in for MemoryStore so every argument the protocol passes (defaults
included) is checked; tests/test_memory_protocol.py runs the same protocol on the real store.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest

from ai_scientist.memory.protocol import (
    OPS,
    ApplyResult,
    MemoryOp,
    OpResult,
    ParseIssue,
    ParseResult,
    apply_updates,
    handle_response,
    memory_update_schema,
    parse_memory_update,
    protocol_instructions,
    strip_memory_blocks,
)


def block(body: str) -> str:
    return f"<memory_update>{body}</memory_update>"


def ops_of(body) -> list[tuple[str, dict]]:
    pr = parse_memory_update(block(body if isinstance(body, str) else json.dumps(body)))
    assert pr.found and pr.ok, pr.error
    return [(o.op, o.args) for o in pr.ops]


def texts(pr: ParseResult) -> list[str]:
    return [str(i) for i in pr.issues]


def issues_of(text: str) -> list[str]:
    pr = parse_memory_update(text)
    assert pr.found and not pr.ok and pr.error == "; ".join(texts(pr))
    return texts(pr)


class Store:
    """Records every call; returns values shaped like MemoryStore's."""

    def __init__(self, enabled: bool = True, fail: str | None = None):
        self.cfg = SimpleNamespace(enabled=enabled)
        self.calls: list[tuple] = []
        self.fail = fail

    def _rec(self, *call):
        self.calls.append(call)
        if self.fail == call[0]:
            raise KeyError(f"no such thing as {call[-1]!r}")

    def core_set(self, branch, key, value, importance, ttl):
        self._rec("core_set", branch, key, value, importance, ttl)
        return SimpleNamespace(key=key, evicted=[SimpleNamespace(key="old", value="v")])

    def core_get(self, branch, key):
        self._rec("core_get", branch, key)
        return SimpleNamespace(value=f"<{key}>") if key != "missing" else None

    def core_delete(self, branch, key):
        self._rec("core_delete", branch, key)
        return True

    def recall_append(self, branch, kind, text, node_id):
        self._rec("recall_append", branch, kind, text, node_id)
        return "r7"

    def recall_search(self, branch, query, k):
        self._rec("recall_search", branch, query, k)
        return [SimpleNamespace(id="r1", kind="note", text="hit", extra="x")]

    def recall_evict(self, branch, ids):
        self._rec("recall_evict", branch, ids)
        return ["r1"]

    def archival_write(self, branch, text, tags, source_ref):
        self._rec("archival_write", branch, text, tags, source_ref)
        return "a3"

    def archival_search(self, query, k, branch):
        self._rec("archival_search", query, k, branch)
        return [SimpleNamespace(id="a1", text="lesson", branch="n1", lanes=["bm25"], score=9)]

    def archival_update(self, branch, ident, text, tags):
        self._rec("archival_update", branch, ident, text, tags)
        return ident

    def consolidate(self, branch, from_id, to_id):
        self._rec("consolidate", branch, from_id, to_id)
        return SimpleNamespace(archival_id="a9", event_ids=["r1", "r2"])

    def expand(self, ident):
        self._rec("expand", ident)
        return f"full text of {ident}"


# ---- blocks and JSON -------------------------------------------------------------------------


def test_strip_blocks_and_results():
    assert strip_memory_blocks(None) == ""
    text = "a <MEMORY_UPDATE x=1>[]</memory_update > b <memory_results>r</memory_results> c"
    assert strip_memory_blocks(text) == "a  b  c"
    assert strip_memory_blocks("answer\n```json\n<memory_update>[]</memory_update>\n```") == "answer"
    assert strip_memory_blocks("keep <memory_update>[unclosed") == "keep"


def test_exact_issue_texts():
    assert issues_of(block("  ")) == ["block 1: the block is empty (put a JSON list of operations inside it)"]
    assert issues_of(block("```\n```")) == [
        "block 1: the block is empty (put a JSON list of operations inside it)"
    ]
    assert issues_of(block("note: nothing to store here at all")) == [
        "block 1: no JSON list or object found (starts with 'note: nothing to store here at') "
        '(write a JSON list like [{"op": "core_set", ...}])'
    ]
    assert issues_of(block('[{"op": "core_get",\n "key": "a"; }]')) == [
        "block 1: invalid JSON at line 2 column 12: Expecting ',' delimiter near '\"key\": \"a\"; }]' "
        "(send valid JSON: double quotes, no trailing commas, no comments)"
    ]
    assert issues_of(block("[]")) == ["block 1: the operation list is empty"]
    assert issues_of(block('[{"op": "core_get", "key": "a"}]')[:-16]) == [
        "block 1: missing closing tag </memory_update> (close the block before the rest of the answer)"
    ]


def test_blocks_are_numbered_and_valid_ops_survive_a_bad_neighbour():
    text = block('[{"op": "core_get", "key": "a"}, 5]') + " and " + block('{"op": "nope"}')
    pr = parse_memory_update(text)
    assert [(o.op, o.args) for o in pr.ops] == [("core_get", {"key": "a"})]
    assert texts(pr) == [
        "block 1 op 2: an operation must be a JSON object, got int",
        "block 2 op 1: unknown op 'nope' (one of: " + ", ".join(OPS) + ")",
    ]
    unclosed = block('{"op": "expand", "id": "a1"}') + ' then <memory_update>{"op": "expand", "id": "a2"}'
    pr = parse_memory_update(unclosed)
    assert [o.args["id"] for o in pr.ops] == ["a1", "a2"]
    assert texts(pr)[0].startswith("block 2: missing closing tag")


def test_json_is_found_inside_fences_prose_and_python_literals():
    op = {"op": "core_get", "key": "a"}
    want = [("core_get", {"key": "a"})]
    assert ops_of(f"```json\n{json.dumps([op])}\n```") == want
    assert ops_of(f"```\n{json.dumps(op)}```") == want
    assert ops_of(f"Here: {json.dumps(op)} [and some] prose") == want  # the first bracket starts it
    assert ops_of(f"{json.dumps([op])} {{not json}}") == want
    assert ops_of('[{"op": "core_get", "key": "a",},]') == want
    assert ops_of('{"ops": [{"op": "core_get", "key": "a" , } , ] }') == want
    assert ops_of("[{'op': 'core_set', 'key': 'a', 'value': 'it''s', 'ttl': None}] trailing (words]") == [
        ("core_set", {"key": "a", "value": "its"})
    ]
    assert ops_of("{'op': 'core_set', 'key': 'q\\'}{', 'value': True} after") == [
        ("core_set", {"key": "q'}{", "value": "True"})
    ]
    assert ops_of("[{'op': 'core_set', 'key': \"]\", 'value': '['}]") == [
        ("core_set", {"key": "]", "value": "["})
    ]
    # an escaped backslash does not escape the closing quote
    assert ops_of("[{'op': 'core_set', 'key': 'a\\\\', 'value': True}] (x]") == [
        ("core_set", {"key": "a\\", "value": "True"})
    ]


# ---- shapes and names ------------------------------------------------------------------------


def test_wrappers_and_op_keys():
    op = {"op": "core_get", "key": "a"}
    want = [("core_get", {"key": "a"})]
    for wrapper in ("ops", "operations", "updates", "memory_update"):
        assert ops_of({wrapper: [op]}) == want
        assert ops_of({wrapper: op}) == want
    assert ops_of({"action": "core_get", "key": "a"}) == want
    assert ops_of({"type": "core_get", "key": "a"}) == want
    assert ops_of({"ops": {"ops": [op]}}) == want
    assert ops_of({"core_get": [{"key": "a"}, {"key": "b"}]}) == [
        ("core_get", {"key": "a"}),
        ("core_get", {"key": "b"}),
    ]


def test_section_form():
    assert ops_of({"Core": {"lr": "0.1", "bs": 32}}) == [
        ("core_set", {"key": "lr", "value": "0.1"}),
        ("core_set", {"key": "bs", "value": "32"}),
    ]
    assert ops_of({"archival": ["lesson", {"text": "t", "tags": "x"}], "recall": ["seen"]}) == [
        ("archival_write", {"text": "lesson"}),
        ("archival_write", {"text": "t", "tags": ["x"]}),
        ("recall_append", {"text": "seen"}),
    ]
    assert issues_of(block('{"core": "flat"}')) == [
        "block 1 op 1: unknown op 'core' (one of: " + ", ".join(OPS) + ")"
    ]
    assert issues_of(block('{"archival": "flat"}'))[0].startswith("block 1 op 1: unknown op 'archival'")
    assert issues_of(block('{"expand": [1, 2]}')) == [
        "block 1 op 1: op expand needs an object of fields, got a bare value"
    ]
    assert issues_of(block('{"ops": "none"}'))[0].startswith("block 1 op 1: unknown op 'ops'")


@pytest.mark.parametrize(
    "name,op",
    [
        ("Core.Set", "core_set"),
        (" core / get ", "core_get"),
        ("core-update", "core_set"),
        ("core_write", "core_set"),
        ("core_put", "core_set"),
        ("set", "core_set"),
        ("core_read", "core_get"),
        ("get", "core_get"),
        ("core_remove", "core_delete"),
        ("delete", "core_delete"),
        ("recall_add", "recall_append"),
        ("recall_write", "recall_append"),
        ("recall:insert", "recall_append"),
        ("recall_query", "recall_search"),
        ("recall_remove", "recall_evict"),
        ("archival_insert", "archival_write"),
        ("archival_add", "archival_write"),
        ("archival_append", "archival_write"),
        ("archival_query", "archival_search"),
        ("archival_edit", "archival_update"),
        ("recall_consolidate", "consolidate"),
        ("consolidate_recall", "consolidate"),
    ],
)
def test_op_aliases(name, op):
    fields = {"core_set": {"key": "k", "value": "v"}, "core_get": {"key": "k"}, "core_delete": {"key": "k"}}
    fields.update(recall_append={"text": "t"}, recall_search={"query": "q"}, recall_evict={"ids": ["r1"]})
    fields.update(archival_write={"text": "t"}, archival_search={"query": "q"}, archival_update={"id": "a1"})
    fields.update(consolidate={})
    assert ops_of({"op": name, **fields[op]}) == [(op, fields[op])]


def test_field_aliases():
    assert ops_of({"op": "core_set", "name": "k", "val": "v"}) == [("core_set", {"key": "k", "value": "v"})]
    assert ops_of({"op": "recall_append", "content": "t"}) == [("recall_append", {"text": "t"})]
    assert ops_of({"op": "consolidate", "from": "r1", "to": "r4"}) == [
        ("consolidate", {"from_id": "r1", "to_id": "r4"})
    ]
    assert ops_of({"op": "archival_search", "query": "q", "top_k": "3"}) == [
        ("archival_search", {"query": "q", "k": 3})
    ]
    assert ops_of({"op": "recall_evict", "id": "r2"}) == [("recall_evict", {"ids": ["r2"]})]
    assert ops_of({"op": "recall_evict", "id": "r2", "ids": ["r3"]}) == [("recall_evict", {"ids": ["r3"]})]
    assert ops_of({"op": "core_get", "keys": ["a", 2]}) == [("core_get", {"key": ["a", "2"]})]
    assert ops_of({"op": "core_get", "keys": ["a"], "key": "b"}) == [("core_get", {"key": "b"})]
    assert ops_of({"op": "consolidate"}) == [("consolidate", {})]
    assert ops_of({"op": "core_get", "key": "a", "importance": None}) == [("core_get", {"key": "a"})]


def test_missing_op_and_field_hints():
    assert issues_of(block('[{"key": "a"}]')) == [
        'block 1 op 1: missing "op" (one of: ' + ", ".join(OPS) + ")"
    ]
    assert issues_of(block('{"op": "", "action": "", "type": ""}'))[0].startswith(
        'block 1 op 1: missing "op"'
    )
    # a lone object without "op" is read in the section form: its key becomes the op name
    assert issues_of(block('{"key": "a"}')) == [
        "block 1 op 1: unknown op 'key' (one of: " + ", ".join(OPS) + ")"
    ]
    assert issues_of(block('{"op": "core_set", "key": "a", "value": null}')) == [
        "block 1 op 1: op core_set is missing field 'value' (fields: key, value (+ optional importance, ttl))"
    ]
    assert issues_of(block('{"op": "core_get"}')) == [
        "block 1 op 1: op core_get is missing field 'key' (fields: key (+ optional -))"
    ]


# ---- field values --------------------------------------------------------------------------


def test_field_coercion():
    assert ops_of({"op": "core_set", "key": 5, "value": {"a": "é"}, "importance": "2", "ttl": "1.5"}) == [
        ("core_set", {"key": "5", "value": '{"a": "é"}', "importance": 2, "ttl": 1.5})
    ]
    assert ops_of({"op": "recall_append", "text": [1, 2], "kind": 3}) == [
        ("recall_append", {"text": "[1, 2]", "kind": "3"})
    ]
    assert ops_of({"op": "archival_write", "text": "t", "tags": ("a", "b")}) == [
        ("archival_write", {"text": "t", "tags": ["a", "b"]})
    ]
    assert issues_of(block('{"op": "core_set", "key": ["a"], "value": "v"}')) == [
        "block 1 op 1: op core_set field 'key' must be a string, got list"
    ]
    assert issues_of(block('{"op": "core_delete", "key": ["a"]}')) == [
        "block 1 op 1: op core_delete field 'key' must be a string, got list"
    ]
    assert issues_of(block('{"op": "recall_search", "query": "q", "k": [2]}')) == [
        "block 1 op 1: op recall_search field 'k' must be a number, got [2]"
    ]


@pytest.mark.parametrize(
    "field,value,error",
    [
        ("importance", 1, None),
        ("importance", 5, None),
        ("importance", 0, "op core_set field 'importance' must be 1..5, got 0"),
        ("importance", 6, "op core_set field 'importance' must be 1..5, got 6"),
        ("ttl", 0.001, None),
        ("ttl", 0, "op core_set field 'ttl' must be > 0, got 0"),
        ("ttl", "x", "op core_set field 'ttl' must be a number, got 'x'"),
    ],
)
def test_number_bounds(field, value, error):
    pr = parse_memory_update(block(json.dumps({"op": "core_set", "key": "k", "value": "v", field: value})))
    if error is None:
        assert pr.ok and pr.ops[0].args[field] == value
    else:
        assert texts(pr) == [f"block 1 op 1: {error}"]


def test_k_bounds():
    assert ops_of({"op": "archival_search", "query": "q", "k": 1}) == [
        ("archival_search", {"query": "q", "k": 1})
    ]
    assert issues_of(block('{"op": "recall_search", "query": "q", "k": 0}')) == [
        "block 1 op 1: op recall_search field 'k' must be > 0, got 0"
    ]


def test_results_and_issues_render():
    assert str(ParseIssue("block 1", "bad")) == "block 1: bad"
    assert str(ParseIssue("block 1", "bad", "fix it")) == "block 1: bad (fix it)"
    assert ParseResult(True).ok and ParseResult(True).error is None
    pr = ParseResult(True, issues=[ParseIssue("a", "b"), ParseIssue("c", "d", "e")])
    assert not pr.ok and pr.error == "a: b; c: d (e)"
    assert parse_memory_update(None) == ParseResult(False)


# ---- applying ------------------------------------------------------------------------------


ALL_OPS = [
    MemoryOp("core_set", {"key": "k", "value": "v"}),
    MemoryOp("core_set", {"key": "k2", "value": "v2", "importance": 5, "ttl": 9.0}),
    MemoryOp("core_get", {"key": ["k", "missing"]}),
    MemoryOp("core_get", {"key": "k"}),
    MemoryOp("core_delete", {"key": "k"}),
    MemoryOp("recall_append", {"text": "t"}),
    MemoryOp("recall_append", {"text": "t", "kind": "obs"}),
    MemoryOp("recall_search", {"query": "q"}),
    MemoryOp("recall_search", {"query": "q", "k": 2}),
    MemoryOp("recall_evict", {"ids": ["r1"]}),
    MemoryOp("archival_write", {"text": "t"}),
    MemoryOp("archival_write", {"text": "t", "tags": ["x"], "source_ref": "n3"}),
    MemoryOp("archival_search", {"query": "q"}),
    MemoryOp("archival_search", {"query": "q", "k": 1}),
    MemoryOp("archival_update", {"id": "a1"}),
    MemoryOp("archival_update", {"id": "a1", "text": "new", "tags": ["y"]}),
    MemoryOp("consolidate", {}),
    MemoryOp("consolidate", {"from_id": "r1", "to_id": "r2"}),
    MemoryOp("expand", {"id": "a1"}),
]


def test_every_op_passes_its_arguments_and_defaults_to_the_store():
    store = Store()
    res = apply_updates(store, "n1", ALL_OPS, node_id="n0004")
    assert store.calls == [
        ("core_set", "n1", "k", "v", 3, None),
        ("core_set", "n1", "k2", "v2", 5, 9.0),
        ("core_get", "n1", "k"),
        ("core_get", "n1", "missing"),
        ("core_get", "n1", "k"),
        ("core_delete", "n1", "k"),
        ("recall_append", "n1", "note", "t", "n0004"),
        ("recall_append", "n1", "obs", "t", "n0004"),
        ("recall_search", "n1", "q", 5),
        ("recall_search", "n1", "q", 2),
        ("recall_evict", "n1", ["r1"]),
        ("archival_write", "n1", "t", [], None),
        ("archival_write", "n1", "t", ["x"], "n3"),
        ("archival_search", "q", 5, "n1"),
        ("archival_search", "q", 1, "n1"),
        ("archival_update", "n1", "a1", None, None),
        ("archival_update", "n1", "a1", "new", ["y"]),
        ("consolidate", "n1", None, None),
        ("consolidate", "n1", "r1", "r2"),
        ("expand", "a1"),
    ]
    assert all(r.ok and r.error is None for r in res.results)
    got = [r.result for r in res.results]
    assert got[0] == {"key": "k", "evicted": [{"key": "old", "value": "v"}]}
    assert got[2] == {"k": "<k>", "missing": None} and got[3] == {"k": "<k>"}
    assert got[4] == {"deleted": True} and got[5] == {"id": "r7"}
    assert got[7] == [{"id": "r1", "kind": "note", "text": "hit"}]
    assert got[9] == {"evicted": ["r1"]} and got[10] == {"id": "a3"}
    assert got[12] == [{"id": "a1", "text": "lesson", "branch": "n1", "lanes": ["bm25"]}]
    assert got[14] == {"id": "a1"}
    assert got[16] == {"archival_id": "a9", "replaces": ["r1", "r2"]}
    assert got[18] == {"id": "a1", "text": "full text of a1"}
    assert [r.op for r in res.reads] == ["core_get", "core_get", "recall_search", "recall_search",
                                        "archival_search", "archival_search", "expand"]  # fmt: skip
    assert res.reads_served and res.errors == [] and res.read_round == 0


def test_an_unknown_op_value_is_reported_not_raised():
    res = apply_updates(Store(), "n1", [MemoryOp("teleport", {})])
    assert res.results == [OpResult("teleport", False, {}, error="ValueError: unknown op teleport")]
    assert res.errors == ["teleport: ValueError: unknown op teleport"]


def test_read_round_boundary_and_failures_as_values():
    reads = [MemoryOp("core_set", {"key": "a", "value": "1"}), MemoryOp("core_get", {"key": "a"})]
    res = apply_updates(Store(), "n1", reads, max_read_rounds=2, read_round=1)
    assert res.reads_served and [r.ok for r in res.results] == [True, True]
    res = apply_updates(Store(), "n1", reads, max_read_rounds=2, read_round=2)
    assert not res.reads_served
    assert res.results[1] == OpResult(
        "core_get", False, {"key": "a"}, error="memory read rounds exhausted (2); answer with what you have"
    )
    assert res.errors == ["core_get: memory read rounds exhausted (2); answer with what you have"]
    writes_only = apply_updates(Store(), "n1", reads[:1])
    assert not writes_only.reads_served and writes_only.reads == []
    res = apply_updates(Store(fail="core_get"), "n1", reads)
    assert res.results[1].error == "KeyError: \"no such thing as 'a'\"" and res.results[0].ok
    assert res.to_dict() == {
        "read_round": 0,
        "reads_served": True,
        "results": [
            {"op": "core_set", "ok": True, "args": {"key": "a", "value": "1"},
             "result": {"key": "a", "evicted": [{"key": "old", "value": "v"}]}, "error": None},
            {"op": "core_get", "ok": False, "args": {"key": "a"}, "result": None,
             "error": "KeyError: \"no such thing as 'a'\""},
        ],
    }  # fmt: skip


def test_results_block_lists_reads_only():
    res = ApplyResult(
        [
            OpResult("core_set", True, {"key": "w"}, {"key": "w"}),
            OpResult("core_get", True, {"key": "k"}, {"k": "v"}),
            OpResult("expand", False, {"id": "a1"}, error="KeyError: a1"),
        ],
        0,
        True,
    )
    text = res.results_block()
    assert text.startswith("<memory_results>") and '"w"' not in text
    assert 'core_get {"key": "k"}:' in text and 'expand {"id": "a1"}: error: KeyError: a1' in text


# ---- the exchange ----------------------------------------------------------------------------


def test_disabled_memory_only_strips_blocks():
    store = Store(enabled=False)
    ex = handle_response(store, "n1", block('{"op": "core_get", "key": "a"}') + "answer", lambda t: 1 / 0)
    assert (ex.final_text, ex.turns, ex.extra_calls, ex.errors, store.calls) == ("answer", [], 0, [], [])


def test_a_store_without_cfg_counts_as_enabled():
    store = Store()
    del store.cfg
    ex = handle_response(
        store, "n1", block('{"op": "core_set", "key": "a", "value": "b"}') + "x", lambda t: "y"
    )
    assert store.calls == [("core_set", "n1", "a", "b", 3, None)] and ex.extra_calls == 0


def test_exchange_records_turns_and_reads_once_per_round():
    store = Store()
    prompts = []
    replies = iter([block('{"op": "expand", "id": "a2"}') + "second", "final answer"])

    def ask(text):
        prompts.append(text)
        return next(replies)

    first = block('[{"op": "core_set", "key": "a", "value": "b"}, {"op": "expand", "id": "a1"}]') + "first"
    ex = handle_response(store, "n1", first, ask, max_read_rounds=3, node_id="n0002")
    assert ex.final_text == "final answer" and ex.extra_calls == 2 and ex.errors == []
    assert [c[0] for c in store.calls] == ["core_set", "expand", "expand"]
    assert len(prompts) == 2 and "full text of a1" in prompts[0] and "full text of a2" in prompts[1]
    assert [t["found"] for t in ex.turns] == [True, True, False]
    assert [t["applied"]["read_round"] for t in ex.turns] == [0, 1, 2]
    assert ex.turns[0]["issues"] == [] and ex.turns[2]["applied"]["results"] == []


def test_reask_then_apply_and_record_remaining_issues():
    store = Store()
    prompts = []
    bad = block('[{"op": "core_set", "key": "a", "value": "b"}, {"op": "nope"}]') + "x"
    ex = handle_response(store, "n1", bad, lambda t: prompts.append(t) or bad)
    issue = "block 1 op 2: unknown op 'nope' (one of: " + ", ".join(OPS) + ")"
    assert len(prompts) == 1 and prompts[0].startswith(
        f"Your <memory_update> block could not be used: {issue}."
    )
    assert ", ".join(OPS) in prompts[0]
    assert ex.turns[0] == {"found": True, "issues": [issue]}
    assert ex.turns[1]["issues"] == [issue] and "applied" in ex.turns[1]
    assert ex.errors == [issue] and ex.extra_calls == 1 and ex.final_text == "x"
    assert store.calls == [("core_set", "n1", "a", "b", 3, None)]  # the first, re-asked block was not applied


def test_failed_follow_up_keeps_the_last_text():
    def boom(text):
        raise TimeoutError("LLM down")

    ex = handle_response(Store(), "n1", block('{"op": "expand", "id": "a1"}') + "kept", boom)
    assert ex.final_text == "kept" and ex.extra_calls == 0
    assert ex.errors == ["follow-up call failed: TimeoutError: LLM down"]


# ---- schema of the JSON answer field ------------------------------------------------------


def test_schema_bounds_every_field():
    schema = memory_update_schema()
    assert schema["type"] == "array" and schema["maxItems"] == 8
    item = schema["items"]
    assert item["required"] == ["op"] and item["additionalProperties"] is False and item["type"] == "object"
    props = item["properties"]
    assert props["op"] == {"type": "string", "enum": list(OPS)}
    bounds = {"key": 80, "value": 800, "text": 800, "query": 200, "kind": 40, "id": 20, "source_ref": 200,
              "from_id": 20, "to_id": 20}  # fmt: skip
    for name, bound in bounds.items():
        assert props[name] == {"type": "string", "maxLength": bound}, name
    for name in ("ids", "tags"):
        assert props[name] == {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 10}
    assert props["importance"] == {"type": "integer"} and props["k"] == {"type": "integer"}
    assert props["ttl"] == {"type": "number"}
    assert set(props) == {"op"} | {f for spec in OPS.values() for f in (*spec["req"], *spec["opt"])}
    jsonschema.validate([{"op": "core_set", "key": "k" * 80, "value": "v", "importance": 3}], schema)
    for bad in (
        [{"op": "core_set", "key": "k" * 81, "value": "v"}],
        [{"op": "core_get", "key": "a", "extra": 1}],
        [{"op": "teleport"}],
        [{"op": "core_get", "key": "a"}] * 9,
        [{"op": "recall_evict", "ids": ["r"] * 11}],
        [{"key": "a"}],
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


# ---- boundaries found by mutation testing --------------------------------------------------


def test_a_fence_inside_the_block_wins_over_brackets_in_prose_before_it():
    assert ops_of('see [1] below\n```json\n[{"op": "core_get", "key": "a"}]\n```') == [
        ("core_get", {"key": "a"})
    ]
    assert issues_of(block("```")) == [
        "block 1: the block is empty (put a JSON list of operations inside it)"
    ]


def test_trailing_commas_are_repaired_with_json_literals():
    assert ops_of('[{"op": "core_set", "key": "a", "value": true, "ttl": null,},]') == [
        ("core_set", {"key": "a", "value": "True"})
    ]


def test_invalid_json_quotes_at_most_60_characters_of_the_line():
    line = '{"op": "core_get", "key": "' + "k" * 80 + '"; }'
    assert issues_of(block(line))[0] == (
        f"block 1: invalid JSON at line 1 column {len(line) - 2}: Expecting ',' delimiter near {line[:60]!r} "
        "(send valid JSON: double quotes, no trailing commas, no comments)"
    )


def test_python_literal_prefix_edge_cases():
    # an empty string first in a quote; a hex literal (an X outside quotes); junk right after the end
    assert ops_of("[{'op': 'core_set', 'key': 'k', 'value': '', 'ttl': 0X2}]x(]") == [
        ("core_set", {"key": "k", "value": "", "ttl": 2.0})
    ]
    assert ops_of("({'op': 'recall_search', 'query': '(', 'k': 0x3},)z") == [
        ("recall_search", {"query": "(", "k": 3})
    ]
    # the very first string is empty: its closing quote is not taken for an escaped one
    assert ops_of("[{'': 0, 'op': 'core_get', 'key': 'k'}]x(]") == [("core_get", {"key": "k"})]


def test_sections_and_op_keys_after_other_keys_are_all_kept():
    assert ops_of({"archival": ["a"], "core": {"k": "v"}, "core_get": [{"key": "x"}, {"key": "y"}]}) == [
        ("archival_write", {"text": "a"}),
        ("core_set", {"key": "k", "value": "v"}),
        ("core_get", {"key": "x"}),
        ("core_get", {"key": "y"}),
    ]
    assert ops_of({"archival_write": {"text": "t", "tags": "two words"}}) == [
        ("archival_write", {"text": "t", "tags": ["two words"]})
    ]


def test_input_that_is_not_text_is_an_issue_not_an_exception():
    pr = parse_memory_update(42)
    assert pr.found and pr.ops == [] and len(pr.issues) == 1
    assert pr.issues[0].where == "response" and pr.issues[0].problem.startswith("unreadable: ")


def test_an_unclosed_block_is_found_whatever_the_case_and_lines():
    text = '<MEMORY_UPDATE>\n[{"op": "core_get",\n "key": "a"}]\nrest'
    pr = parse_memory_update(text)
    assert [o.op for o in pr.ops] == ["core_get"]
    assert texts(pr) == [
        "block 1: missing closing tag </memory_update> (close the block before the rest of the answer)"
    ]


def test_a_bad_block_does_not_stop_the_next_one():
    text = block("[oops") + block('{"op": "expand", "id": "a1"}')
    pr = parse_memory_update(text)
    assert [(o.op, o.args) for o in pr.ops] == [("expand", {"id": "a1"})]
    assert len(pr.issues) == 1 and pr.issues[0].where == "block 1"


def test_default_read_rounds_are_two():
    reads = [MemoryOp("core_get", {"key": "a"}), MemoryOp("core_set", {"key": "b", "value": "1"})]
    res = apply_updates(Store(), "n1", reads, read_round=2)
    assert [r.ok for r in res.results] == [False, True]  # a refused read does not stop later writes
    assert apply_updates(Store(), "n1", reads, read_round=1).results[0].ok
    greedy = block('{"op": "expand", "id": "a1"}') + "x"
    asked = []
    ex = handle_response(Store(), "n1", greedy, lambda t: asked.append(t) or greedy)
    assert len(asked) == 2 and ex.extra_calls == 2


def test_errors_of_every_turn_are_kept_and_node_id_reaches_the_store():
    store = Store()
    replies = iter(
        [
            block('[{"op": "expand", "id": "a1"}, {"op": "nope1"}, {"op": "recall_append", "text": "t"}]'),
            block('[{"op": "nope2"}]') + "final",
        ]
    )
    ex = handle_response(store, "n1", block('{"op": "nope0"}'), lambda t: next(replies), node_id="n0009")
    assert [e.split(":")[0] for e in ex.errors] == ["block 1 op 2", "block 1 op 1"]
    assert "'nope1'" in ex.errors[0] and "'nope2'" in ex.errors[1]
    assert ("recall_append", "n1", "note", "t", "n0009") in store.calls
    assert ex.final_text == "final" and ex.extra_calls == 2


def test_protocol_instructions_show_the_configured_limits():
    text = protocol_instructions(SimpleNamespace(core_max_chars=1234, max_memory_read_rounds=7))
    assert "at most 1234 characters" in text and "at most 7 such round(s)" in text
