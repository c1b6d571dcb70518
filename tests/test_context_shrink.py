"""Direct tests of every policy's ``prepare``/``shrink`` and of the JSON preview's limits.

A ``shrink`` must return the LARGEST candidate that fits (a policy that always refuses,
or always cuts to nothing, fails here), and every boundary of the preview (string cap,
``list_head + 1``, depth limit, metadata keys) is exercised on both sides.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from ai_scientist.context.json_preview import (
    PreviewParams,
    minimal_preview,
    parse_json,
    preview_json,
    preview_ladder,
)
from ai_scientist.context.policies import (
    LAYER_POLICIES,
    Head,
    HeadRows,
    HeadSentences,
    HeadTail,
    HistoryPrune,
    JSONPreview,
    LayerPolicy,
    PolicyParams,
    RankRows,
    StripReasoning,
    TailWindow,
    WholeItems,
    _largest,
    get_layer_policy,
)

TEXT = "".join(f"row {i:03d} {'abcdefghij' * (i % 4)}\n" for i in range(120))


def under(limit):
    return lambda candidate: len(candidate if isinstance(candidate, str) else json.dumps(candidate)) <= limit


def largest_fitting(cut, text, n_max, fits):
    """Brute force: the largest n in [0, n_max] whose cut fits."""
    return max((n for n in range(n_max + 1) if fits(cut(text, n))), default=None)


# ---- params and registry -------------------------------------------------------------------


def test_params_from_config_takes_known_fields_only():
    assert PolicyParams.from_config(None) == PolicyParams()
    cfg = SimpleNamespace(tail_window_chars=10, history_keep_turns=2, unrelated=1)
    assert PolicyParams.from_config(cfg) == PolicyParams(tail_window_chars=10, history_keep_turns=2)
    full = {f: getattr(PolicyParams(), f) for f in PolicyParams.__dataclass_fields__}
    full.update(json_preview_list_head=5, strip_reasoning=False, json_preview_string_cap=7)
    assert PolicyParams.from_config(SimpleNamespace(**full)) == PolicyParams(**full)


def test_defaults_are_the_documented_ones():
    assert PolicyParams() == PolicyParams(4000, 5000, 2, 500, 8, True)
    assert PreviewParams() == PreviewParams(2, 500, 16)


def test_head_rows_cuts_the_last_rows_and_keeps_the_header():
    table = [
        "| rank | setting | result |\n|---|---|---|",
        *(f"| {i} | lr={i / 10} | acc={1 - i / 100} |" for i in range(1, 9)),
    ]
    fits = under(len(json.dumps(table[:4])) + 60)  # header + about three rows and the marker
    value, note = HeadRows().shrink(table, fits, PolicyParams(), None)
    kept = len(value) - 2  # header and marker
    assert value[: kept + 1] == table[: kept + 1] and 1 <= kept < 8
    assert value[-1] == f"[... {8 - kept} lower-ranked rows cut (8 total) ...]"
    assert note == f"kept header + best {kept} of 8 rows"
    assert fits(value) and not fits(HeadRows.cut(table, kept + 1))  # the largest that fits
    assert HeadRows().shrink(table, under(10), PolicyParams(), None) is None  # not even the header
    assert HeadRows().shrink("plain text " * 40, under(100), PolicyParams(), None)[1].startswith("head kept")


def test_rank_rows_cuts_the_lowest_ranked_rows_and_keeps_creation_order():
    # rows in creation order (n01..n08), the ranking on the last line; n03 and n06 are not ranked
    # (failed / running): they go first, the newest first, then the worst ranked
    ranking = "Ranked best first: n05, n02, n08, n01, n07, n04."
    table = [
        "| node | setting | result |\n|---|---|---|",
        *(f"| n0{i} | lr={i / 10} | acc={i / 100} |" for i in range(1, 9)),
        ranking,
    ]
    assert RankRows.cut_order(table[1:-1], ranking) == [5, 2, 3, 6, 0, 7, 1, 4]
    for keep, shown, best in (
        (6, "n01 n02 n04 n05 n07 n08", "n05, n02, n08, n01, n07, n04."),
        (3, "n02 n05 n08", "n05, n02, n08."),
        (1, "n05", ""),  # a ranking of one row says nothing the row does not
        (0, "", ""),
    ):
        value = RankRows.cut(table, keep)
        rows, tail = (value[1:-2], value[-2:]) if best else (value[1:-1], [*value[-1:], ""])
        assert [r.split(" | ")[0][2:] for r in rows] == shown.split(), keep
        assert value[0] == table[0] and tail[1] == ("Ranked best first: " + best if best else "")
        assert tail[0] == f"[... {8 - keep} lower-ranked rows cut (8 total) ...]"
    assert RankRows.cut(table, 8) == table
    fits = under(len(json.dumps(RankRows.cut(table, 3))))
    value, note = RankRows().shrink(table, fits, PolicyParams(), None)
    assert value == RankRows.cut(table, 3) and note == "kept header + best 3 of 8 rows"
    # without a ranking line it is head_rows
    plain = table[:-1]
    assert RankRows().shrink(plain, fits, PolicyParams(), None) == HeadRows().shrink(
        plain, fits, PolicyParams(), None
    )


def test_registry_names_and_cut_actions():
    assert {name: type(p) for name, p in LAYER_POLICIES.items()} == {
        "none": LayerPolicy,
        "tail": TailWindow,
        "head": Head,
        "head_sentences": HeadSentences,
        "head_tail": HeadTail,
        "json_preview": JSONPreview,
        "history_prune": HistoryPrune,
        "head_rows": HeadRows,
        "rank_rows": RankRows,
        "whole_items": WholeItems,
        "strip_reasoning": StripReasoning,
    }
    assert {n: p.cut_action for n, p in LAYER_POLICIES.items() if p.cut_action != "truncated"} == {
        "json_preview": "previewed",
        "strip_reasoning": "stripped",
    }
    assert get_layer_policy("tail") is LAYER_POLICIES["tail"]
    with pytest.raises(ValueError) as exc:
        get_layer_policy("nope")
    assert str(exc.value) == (
        "unknown context policy 'nope'; known: head, head_rows, head_sentences, head_tail, history_prune, json_preview, "
        "none, rank_rows, strip_reasoning, tail, whole_items"
    )


def test_the_base_policy_never_cuts():
    assert LayerPolicy().prepare(TEXT, PolicyParams(), None) is None
    assert LayerPolicy().shrink(TEXT, lambda c: True, PolicyParams(), None) is None


# ---- binary search ---------------------------------------------------------------------------


@pytest.mark.parametrize("limit,n_max", [(0, 10), (1, 10), (7, 10), (10, 10), (11, 10), (5, 0), (63, 64)])
def test_largest_finds_the_largest_n_that_fits(limit, n_max):
    calls = []

    def fits(n):
        calls.append(n)
        return n <= limit

    assert _largest(n_max, lambda n: n, fits) == (min(limit, n_max), min(limit, n_max))
    assert calls[0] == 0


def test_largest_refuses_when_even_zero_does_not_fit():
    assert _largest(10, lambda n: n, lambda n: False) is None


# ---- tail / head / head_tail -----------------------------------------------------------------


def test_tail_cut_marker_and_line_boundary():
    assert TailWindow.cut("abc", 3) == "abc" and TailWindow.cut("abc", 9) == "abc"
    assert TailWindow.cut("abcdef", 2) == "[... 4 earlier characters cut; last 2 kept ...]\nef"
    # a newline within keep // 10 of the start moves the start past it
    text = "x" * 45 + "\n" + "y" * 54  # keep 60: start 40, newlines looked for in 40..45
    assert TailWindow.cut(text, 60) == f"[... 46 earlier characters cut; last 54 kept ...]\n{'y' * 54}"
    text = "x" * 46 + "\n" + "y" * 53  # ... but not one further away
    assert (
        TailWindow.cut(text, 60)
        == f"[... 40 earlier characters cut; last 60 kept ...]\n{'x' * 6}\n{'y' * 53}"
    )
    # keep < 10: the window is one character, the newline must be right at the start
    assert TailWindow.cut("ab\ncd", 3) == "[... 3 earlier characters cut; last 2 kept ...]\ncd"
    assert TailWindow.cut("abc\nd", 3) == "[... 2 earlier characters cut; last 3 kept ...]\nc\nd"


def test_tail_prepare_applies_the_window_above_its_size_only():
    params = PolicyParams(tail_window_chars=len(TEXT))
    assert TailWindow().prepare(TEXT, params, None) is None
    params = PolicyParams(tail_window_chars=len(TEXT) - 1)
    out, note = TailWindow().prepare(TEXT, params, None)
    assert out == TailWindow.cut(TEXT, len(TEXT) - 1)
    assert note == f"tail window {len(TEXT) - 1} chars"
    out, _ = TailWindow().prepare({"k": TEXT}, PolicyParams(tail_window_chars=100), None)
    assert out.endswith('\\n"\n}') and len(out) < 200  # non-strings are cut as their JSON text


@pytest.mark.parametrize("policy", [TailWindow(), StripReasoning()])
@pytest.mark.parametrize("limit", [60, 200, 1000])
def test_tail_shrink_keeps_the_largest_window_that_fits(policy, limit):
    params = PolicyParams(tail_window_chars=800)
    fits = under(limit)
    out, note = policy.shrink(TEXT, fits, params, None)
    n = largest_fitting(TailWindow.cut, TEXT, 800, fits)
    assert out == TailWindow.cut(TEXT, n) and note == f"tail window cut to {n} chars"
    assert fits(out) and (n == 800 or not fits(TailWindow.cut(TEXT, n + 1)))


def test_tail_shrink_is_capped_by_the_window_and_refuses_when_nothing_fits():
    out, note = TailWindow().shrink(TEXT, lambda c: True, PolicyParams(tail_window_chars=300), None)
    assert out == TailWindow.cut(TEXT, 300) and note == "tail window cut to 300 chars"
    out, note = TailWindow().shrink("short", lambda c: True, PolicyParams(), None)
    assert (out, note) == ("short", "tail window cut to 5 chars")
    assert TailWindow().shrink(TEXT, lambda c: False, PolicyParams(), None) is None
    assert StripReasoning().shrink(TEXT, lambda c: False, PolicyParams(), None) is None


def test_head_cut_and_shrink():
    assert Head.cut("abcdef", 6) == "abcdef"
    assert Head.cut("abcdef", 2) == "ab\n[... 4 more characters cut ...]"
    for limit in (40, 300, 10_000):
        fits = under(limit)
        out, note = Head().shrink(TEXT, fits, PolicyParams(tail_window_chars=5), None)
        n = largest_fitting(Head.cut, TEXT, len(TEXT), fits)  # not capped by any window
        assert out == Head.cut(TEXT, n) and note == f"head kept {n} chars"
    assert Head().shrink(TEXT, lambda c: False, PolicyParams(), None) is None


def test_head_tail_cut_and_shrink():
    assert HeadTail.cut("abcdefghij", 10) == "abcdefghij"
    assert HeadTail.cut("abcdefghij", 6) == "ab\n[... 4 characters cut from the middle ...]\nghij"
    assert HeadTail.cut("abcdefghij", 1) == "\n[... 9 characters cut from the middle ...]\nj"
    assert HeadTail.cut("abcdefghij", 0) == "\n[... 10 characters cut from the middle ...]\n"
    for limit in (60, 400, 10_000):
        fits = under(limit)
        out, note = HeadTail().shrink(TEXT, fits, PolicyParams(), None)
        n = largest_fitting(HeadTail.cut, TEXT, len(TEXT), fits)
        assert out == HeadTail.cut(TEXT, n) and note == f"head+tail kept {n} chars"
    assert HeadTail().shrink(TEXT, lambda c: False, PolicyParams(), None) is None


# ---- history pruning -------------------------------------------------------------------------


def test_prune_boundaries():
    items = list(range(6))
    assert HistoryPrune.prune(items, 5) == items and HistoryPrune.prune(items, 5) is not items
    assert HistoryPrune.prune(items, 4) == [0, "[... 1 earlier steps omitted (6 total) ...]", 2, 3, 4, 5]
    assert HistoryPrune.prune(items, 0) == [0, "[... 5 earlier steps omitted (6 total) ...]"]


def test_history_prepare():
    steps = list(range(9))
    assert HistoryPrune().prepare(steps, PolicyParams(history_keep_turns=8), None) is None
    out, note = HistoryPrune().prepare(steps, PolicyParams(history_keep_turns=7), None)
    assert out == HistoryPrune.prune(steps, 7) and note == "kept first + last 7 of 9 steps"
    # plain text falls back to the tail window
    params = PolicyParams(tail_window_chars=50)
    assert HistoryPrune().prepare(TEXT, params, None) == TailWindow().prepare(TEXT, params, None)


def test_history_shrink_keeps_the_most_steps_that_fit():
    steps = [f"step {i} " + "x" * 20 for i in range(12)]
    params = PolicyParams(history_keep_turns=8)
    for limit in (60, 150, 250, 100_000):
        fits = under(limit)
        res = HistoryPrune().shrink(steps, fits, params, None)
        keeps = [k for k in range(8, -1, -1) if fits(HistoryPrune.prune(steps, k))]
        if not keeps:
            assert res is None
            continue
        assert res == (HistoryPrune.prune(steps, keeps[0]), f"kept first + last {keeps[0]} of 12 steps")
    assert HistoryPrune().shrink(steps, under(250), params, None)[0][-1] == steps[-1]
    # a short list is tried whole first (keep = len - 1)
    assert HistoryPrune().shrink(steps[:3], lambda c: True, params, None) == (
        steps[:3],
        "kept first + last 2 of 3 steps",
    )
    assert HistoryPrune().shrink(steps, lambda c: False, params, None) is None
    text_params = PolicyParams(tail_window_chars=100)
    assert HistoryPrune().shrink(TEXT, under(80), text_params, None) == TailWindow().shrink(
        TEXT, under(80), text_params, None
    )


# ---- reasoning -------------------------------------------------------------------------------


def test_strip_reasoning_prepare():
    value = "<think>secret plan</think>the answer"
    out, note = StripReasoning().prepare(value, PolicyParams(), None)
    assert out == "the answer" and note == f"reasoning stripped ({len(value) - len('the answer')} chars)"
    assert StripReasoning().prepare(value, PolicyParams(strip_reasoning=False), None) is None
    assert StripReasoning().prepare("no thinking", PolicyParams(), None) is None


# ---- JSON preview policy -------------------------------------------------------------------


ROWS = {"rows": [{"i": i, "text": "word " * 60} for i in range(40)], "status": "ok"}


def test_json_prepare_threshold_is_inclusive():
    text = json.dumps(ROWS)
    assert JSONPreview().prepare(text, PolicyParams(json_preview_threshold_chars=len(text)), None) is None
    out, note = JSONPreview().prepare(text, PolicyParams(json_preview_threshold_chars=len(text) - 1), "h")
    assert out == preview_json(ROWS, PreviewParams(2, 500), "h", len(text))
    assert note == f"JSON over {len(text) - 1} chars previewed"
    plain = "x" * 300
    out, note = JSONPreview().prepare(plain, PolicyParams(json_preview_threshold_chars=100), None)
    assert out == HeadTail.cut(plain, 100) and note == "text over 100 chars: head+tail kept 100"


def test_json_shrink_takes_the_first_ladder_step_that_fits():
    text = json.dumps(ROWS)
    params = PolicyParams(json_preview_list_head=3, json_preview_string_cap=200)
    ladder = preview_ladder(PreviewParams(3, 200))
    previews = [preview_json(ROWS, p, "h", len(text)) for p in ladder]
    for i, p in enumerate(ladder):
        limit = len(previews[i])
        if any(len(prev) <= limit for prev in previews[:i]):
            continue  # an earlier (larger) step already fits this budget
        out, note = JSONPreview().shrink(text, under(limit), params, "h")
        assert out == previews[i]
        assert note == f"JSON previewed (first {p.list_head} + last item per list, strings <= {p.string_cap})"
    smallest = minimal_preview(ROWS, "h", len(text))
    assert min(len(p) for p in previews) > len(smallest)
    out, note = JSONPreview().shrink(text, under(len(smallest)), params, "h")
    assert (out, note) == (smallest, "JSON reduced to its shape and handle")
    assert JSONPreview().shrink(text, under(len(smallest) - 1), params, "h") is None


def test_json_shrink_of_plain_text_is_head_tail_capped_by_the_threshold():
    params = PolicyParams(json_preview_threshold_chars=500)
    out, note = JSONPreview().shrink(TEXT, lambda c: True, params, None)
    assert out == HeadTail.cut(TEXT, 500) and note == "text head+tail kept 500 chars"
    fits = under(200)
    out, note = JSONPreview().shrink(TEXT, fits, params, None)
    n = largest_fitting(HeadTail.cut, TEXT, 500, fits)
    assert out == HeadTail.cut(TEXT, n) and note == f"text head+tail kept {n} chars"
    assert JSONPreview().shrink(TEXT, lambda c: False, params, None) is None


# ---- json_preview module -------------------------------------------------------------------


def test_parse_json():
    assert parse_json({"a": 1}) == {"a": 1} and parse_json([1]) == [1]
    assert parse_json('  \n{"a": [1]} ') == {"a": [1]}
    assert parse_json("[1, 2]") == [1, 2]
    assert parse_json("[1, 2") is None
    assert parse_json("42") is None and parse_json('"{x}"') is None and parse_json("") is None
    assert parse_json(42) is None and parse_json(None) is None


def test_string_cap_boundary_and_metadata_strings():
    p = PreviewParams(list_head=2, string_cap=30)
    exact, over = "a" * 30, "0123456789" * 3 + "X"
    body = json.loads(preview_json({"s": exact, "t": over}, p))
    assert body["s"] == exact
    # a plain field keeps its start (what it is); a log-like field both ends (errors come last)
    assert body["t"] == "012345678901234567890123456789 [... 1 more chars cut]"
    assert body["_preview"]["strings_capped"] == 1
    log = json.loads(preview_json({"stderr": over}, p))
    assert log["stderr"] == "0123456789 [... 1 chars cut ...] 1234567890123456789X"
    meta = json.loads(preview_json({"status": "e" * 120, "Errors": ["f" * 121]}, p))
    assert meta["status"] == "e" * 120  # metadata keys keep 4x the cap (case-insensitive)
    assert meta["Errors"][0].startswith("f" * 40 + " [... 1 chars cut ...] ")


def test_list_head_plus_one_boundary():
    p = PreviewParams(list_head=2, string_cap=50)
    body = json.loads(preview_json({"xs": [1, 2, 3]}, p))
    assert body["xs"] == [1, 2, 3] and body["_preview"]["list_totals"] == {}
    body = json.loads(preview_json({"xs": [1, 2, 3, 4]}, p))
    assert body["xs"] == [1, 2, "... 1 more items omitted (4 total) ...", 4]
    assert body["_preview"]["list_totals"] == {"$.xs": 4}
    zero = json.loads(preview_json([[1], [1, 2], [{"a": [1, 2, 3]}]], PreviewParams(list_head=0)))
    assert zero["data"] == [
        "... 2 more items omitted (3 total) ...",
        [{"a": ["... 2 more items omitted (3 total) ...", 3]}],
    ]
    assert zero["_preview"]["list_totals"] == {"$": 3, "$[2][0].a": 3}
    # metadata lists keep at least 8 items (+ the last)
    meta = json.loads(preview_json({"sources": list(range(9)), "metrics": list(range(10))}, p))
    assert meta["sources"] == list(range(9))
    assert meta["metrics"] == [*range(8), "... 1 more items omitted (10 total) ...", 9]


def test_depth_limit():
    p = PreviewParams(list_head=2, string_cap=50, max_depth=2)
    data = {"a": {"b": {"c": 1, "d": 2}, "e": {}, "f": [1, 2], "g": []}, "h": [[[1]]]}
    body = json.loads(preview_json(data, p))
    # past the depth a list still shows its first item (an object or list in outline) and a count
    assert body["a"] == {
        "b": "{... object with keys c, d ...}",
        "e": {},
        "f": [1, "... 1 more items (2 total) ..."],
        "g": [],
    }
    assert body["h"] == [["[... list of 1 items ...]"]]
    assert body["_preview"]["list_totals"] == {"$.a.f": 2, "$.h[0]": 1}
    # one level more and everything is kept
    deeper = json.loads(preview_json(data, PreviewParams(list_head=2, string_cap=50, max_depth=4)))
    assert {k: v for k, v in deeper.items() if k != "_preview"} == data


def test_preview_envelope():
    data = {"k": "é" * 3}
    out = preview_json(data, PreviewParams(), "n1/2")
    assert "é" in out  # not escaped
    assert json.loads(out) == {
        "_preview": {
            "note": "preview of a larger JSON payload; long lists show their first items and their last item, "
            "repeated structures once with a count",
            "original_chars": len(json.dumps(data, ensure_ascii=False)),
            "handle": "n1/2",
            "list_totals": {},
            "strings_capped": 0,
        },
        "k": "ééé",
    }
    assert json.loads(preview_json(data, PreviewParams(), None, 999))["_preview"]["original_chars"] == 999
    clash = json.loads(preview_json({"_preview": 1}, PreviewParams()))
    assert clash["data"] == {"_preview": 1}
    assert json.loads(preview_json([1], PreviewParams()))["data"] == [1]


def test_minimal_preview():
    keys = {f"k{i:02d}": i for i in range(25)}
    out = json.loads(minimal_preview(keys, "h", 1234))
    assert out == {
        "_preview": {
            "note": "payload too large to preview here; fetch it by handle",
            "original_chars": 1234,
            "handle": "h",
            "top_level_keys": [f"k{i:02d}" for i in range(20)],
            "key_count": 25,
        }
    }
    assert json.loads(minimal_preview([1, 2, 3], None, 5))["_preview"]["item_count"] == 3
    assert "é" in minimal_preview({"é": 1}, None, 1)


def test_preview_ladder_steps():
    assert preview_ladder(PreviewParams(3, 400)) == [
        PreviewParams(3, 400, 16),
        PreviewParams(3, 200, 16),
        PreviewParams(1, 100, 16),
        PreviewParams(0, 50, 16),
        PreviewParams(0, 20, 6),
        PreviewParams(0, 20, 3),
        PreviewParams(0, 20, 1),
    ]
    # small caps never go under 20; duplicates are dropped; list_head never grows
    assert preview_ladder(PreviewParams(0, 20)) == [
        PreviewParams(0, 20, 16),
        PreviewParams(0, 20, 6),
        PreviewParams(0, 20, 3),
        PreviewParams(0, 20, 1),
    ]
    assert preview_ladder(PreviewParams(1, 60))[1:4] == [
        PreviewParams(1, 30),
        PreviewParams(1, 20),
        PreviewParams(0, 20),
    ]


# ---- boundaries found by mutation testing --------------------------------------------------


def test_tail_cut_starts_after_the_first_newline_in_the_window():
    text = "x" * 100 + "ab\n" + "cd\n" + "z" * 95  # keep 100: start 101, window 101..110
    assert TailWindow.cut(text, 100) == f"[... 103 earlier characters cut; last 98 kept ...]\ncd\n{'z' * 95}"


def test_json_original_size_is_that_of_the_text_as_given():
    text = json.dumps(ROWS, indent=2)  # larger than the compact form the preview would measure
    params = PolicyParams(json_preview_threshold_chars=1000)
    out, _ = JSONPreview().prepare(text, params, None)
    assert json.loads(out)["_preview"]["original_chars"] == len(text)
    out, _ = JSONPreview().shrink(text, under(3000), params, None)
    assert json.loads(out)["_preview"]["original_chars"] == len(text)


def test_history_shrink_never_goes_below_keeping_no_step():
    steps = list(range(12))
    # a (non-monotone) fits that refuses the keep=0 candidate: nothing smaller may be offered
    fits = lambda c: len(c) == 2 and c != HistoryPrune.prune(steps, 0)  # noqa: E731
    assert HistoryPrune().shrink(steps, fits, PolicyParams(history_keep_turns=8), None) is None
    only_zero = lambda c: len(c) == 2  # noqa: E731
    assert HistoryPrune().shrink(steps, only_zero, PolicyParams(history_keep_turns=8), None) == (
        HistoryPrune.prune(steps, 0),
        "kept first + last 0 of 12 steps",
    )


def test_every_capped_string_is_counted():
    p = PreviewParams(string_cap=20)
    out = json.loads(preview_json({"a": "x" * 21, "b": ["y" * 30, "short"], "c": "z" * 20}, p))
    assert out["_preview"]["strings_capped"] == 2


def test_items_of_a_long_metadata_list_keep_the_metadata_cap():
    p = PreviewParams(list_head=2, string_cap=20)
    sources = [f"{i:02d}" + "s" * 58 for i in range(12)]  # over the cap, under 4x the cap
    out = json.loads(preview_json({"sources": sources}, p))
    assert out["sources"] == [*sources[:8], "... 3 more items omitted (12 total) ...", sources[-1]]


def test_items_of_a_long_list_go_one_level_deeper():
    p = PreviewParams(list_head=1, string_cap=50, max_depth=3)
    data = {"xs": [{"a": {"b": 1}}, {"a": {"b": 2}}, {"a": {"b": 3}}]}
    out = json.loads(preview_json(data, p))
    # $ (0) -> xs (1) -> item (2) -> a (3: at the limit, its object is summarised)
    # (items with the same keys: the first and the last, and a count naming the keys)
    marker = "... 3 x {a}: 1 more items with these keys omitted (3 total) ..."
    assert out["xs"] == [{"a": "{... object with keys b ...}"}, marker, {"a": "{... object with keys b ...}"}]
    out = json.loads(preview_json(data, PreviewParams(list_head=1, string_cap=50, max_depth=4)))
    assert out["xs"] == [{"a": {"b": 1}}, marker, {"a": {"b": 3}}]


def test_the_idea_is_cut_at_a_sentence_end_never_mid_sentence():
    """The task layer (the research idea) keeps whole sentences: a cut idea once read "A variant
    ## Instructions" (issue 28)."""
    from ai_scientist.context.spec import LAYERS

    assert LAYERS["task"].policy == "head_sentences"
    idea = (
        "# Title\n\nFirst claim holds. Second claim is longer and matters. A variant of the method is tried."
    )
    for keep in range(40, len(idea)):
        out = HeadSentences.cut(idea, keep)
        kept = out.split("\n[... ")[0]
        assert idea.startswith(kept) and len(kept) <= keep
        assert kept.endswith((".", "Title")) or kept == idea, (keep, kept)
    words = "one two three four five six seven eight nine ten"
    assert HeadSentences.cut(words, 20).startswith("one two three four\n[... ")
    fits = lambda c: len(c) <= 60  # noqa: E731
    out, note = HeadSentences().shrink(idea, fits, PolicyParams(), None)
    assert fits(out) and out.split("\n[... ")[0].endswith(".") and "sentence end" in note
