"""The JSON preview's repeated structures and outlines (issue 28), pinned at their edges.

The survivors of ``scripts/mutation.sh context/json_preview.py`` (docs/testing.md, "Scores")
showed them untested: which lists count as "all identical" (containers, strings over 40
characters, from the first item on), which records share their keys, how many keys a marker or
an outline names, and how the one item kept past the depth limit is cut."""

from __future__ import annotations

import json
from typing import Any

from ai_scientist.context.json_preview import PreviewParams, preview_json

P = PreviewParams(list_head=2, string_cap=20)


def preview(data: Any, params: PreviewParams = P) -> tuple[Any, dict[str, int]]:
    out = json.loads(preview_json(data, params))
    meta = out.pop("_preview")
    return (out if isinstance(data, dict) else out["data"]), meta["list_totals"]


def collapsed(n: int) -> str:
    return f"... {n} x the item above: all identical ({n} total) ..."


def test_a_list_of_identical_containers_is_shown_once_with_its_count_from_two_items_on():
    rec = {"a": 1, "b": [1, 2]}
    assert preview([rec, rec]) == ([rec, collapsed(2)], {"$": 2})
    assert preview([[1, 2]] * 5) == ([[1, 2], collapsed(5)], {"$": 5})


def test_only_a_run_equal_from_the_first_item_is_identical():
    a, b = {"a": 1}, {"a": 2}
    assert preview([a, b, b]) == ([a, b, b], {})  # the first differs: shown as it is
    assert preview([a, b, a]) == ([a, b, a], {})  # the third differs from the second


def test_equal_short_strings_and_numbers_are_not_collapsed_long_strings_are():
    for item in ("ab", 7, "x" * 40):  # cheap to show: the list is only shortened as usual
        got, totals = preview([item] * 5, PreviewParams(list_head=2, string_cap=100))
        assert got == [item, item, "... 2 more items omitted (5 total) ...", item], item
        assert totals == {"$": 5}
    long = "y" * 41
    got, _ = preview([long] * 5, PreviewParams(list_head=2, string_cap=100))
    assert got == [long, collapsed(5)]


def test_identical_items_are_walked_at_the_first_items_path():
    rec = {"v": list(range(10))}
    got, totals = preview([rec] * 3)
    assert totals == {"$": 3, "$[0].v": 10}
    assert got[0]["v"] == [0, 1, "... 7 more items omitted (10 total) ...", 9]


def test_records_name_their_shared_keys_in_the_marker_only_when_all_share_them():
    same = [{"a": i, "b": -i} for i in range(4)]
    got, _ = preview(same)
    assert got[2] == "... 4 x {a, b}: 1 more items with these keys omitted (4 total) ..."
    for first, third in (({"x": 1}, {"a": 2, "b": 3}), ({"a": 1, "b": 1}, {"c": 1})):
        mixed = [first, {"a": 0, "b": 0}, third, {"a": 9, "b": 9}]
        got, _ = preview(mixed)
        assert got[2] == "... 1 more items omitted (4 total) ...", mixed
    # the second differs, the rest share the first's keys: still not one shape
    got, _ = preview([{"a": 1, "b": 1}, {"c": 1}, {"a": 2, "b": 2}, {"a": 3, "b": 3}])
    assert got[2] == "... 1 more items omitted (4 total) ..."


def test_the_shared_keys_marker_names_at_most_twelve_keys():
    for n_keys, shape in (
        (12, ", ".join(f"k{i:02d}" for i in range(12))),
        (13, ", ".join(f"k{i:02d}" for i in range(12)) + ", ..."),
    ):
        recs = [{f"k{i:02d}": j for i in range(n_keys)} for j in range(4)]
        got, _ = preview(recs)
        assert got[2] == f"... 4 x {{{shape}}}: 1 more items with these keys omitted (4 total) ...", n_keys


def test_an_object_past_the_depth_limit_is_outlined_with_at_most_eight_keys():
    shallow = PreviewParams(list_head=2, string_cap=20, max_depth=1)
    eight = {f"k{i}": i for i in range(8)}
    nine = {f"k{i}": i for i in range(9)}
    assert preview({"x": eight}, shallow)[0] == {
        "x": "{... object with keys k0, k1, k2, k3, k4, k5, k6, k7 ...}"
    }
    assert preview({"x": nine}, shallow)[0] == {
        "x": "{... object with keys k0, k1, k2, k3, k4, k5, k6, k7, ... (9 keys) ...}"
    }


def test_the_string_kept_past_the_depth_limit_is_cut_as_its_field_says():
    shallow = PreviewParams(list_head=2, string_cap=20, max_depth=1)
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    got, totals = preview({"plain": [text, "x"], "meta": [text], "stderr": [text, "y"]}, shallow)
    assert totals == {"$.plain": 2, "$.meta": 1, "$.stderr": 2}
    assert got["plain"] == [f"{text[:20]} [... 80 more chars cut]", "... 1 more items (2 total) ..."]
    assert got["meta"] == [f"{text[:80]} [... 20 more chars cut]"]  # metadata keeps 4x the cap
    assert got["stderr"][0] == f"{text[:6]} [... 80 chars cut ...] {text[-14:]}"  # a log keeps its end
