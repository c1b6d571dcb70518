"""Direct tests of ``pack()``: each rule of the packer's docstring, on its exact boundary.

``assemble()`` repacks until the rendered prompt fits, which hides accounting errors in the
packer; these tests call ``pack()`` with a recording ``shrink`` and check every outcome.
"""

from __future__ import annotations

import pytest

from ai_scientist.context.budget import ContextBudgetError
from ai_scientist.context.packer import Outcome, PackItem, pack


class Shrinker:
    """A ``shrink`` callback: records every call; per layer it returns the target, target - waste, or None."""

    def __init__(self, waste: dict[str, int] | None = None, refuse: set[str] | None = None):
        self.waste = waste or {}
        self.refuse = refuse or set()
        self.calls: list[tuple[str, int]] = []

    def __call__(self, name: str, target: int) -> int | None:
        self.calls.append((name, target))
        if name in self.refuse:
            return None
        return target - self.waste.get(name, 0)


def item(name, tokens, priority=0, *, pinned=False, floor=None, order=0):
    return PackItem(name, tokens, priority, pinned, tokens if floor is None else floor, order)


# ---- rule 1: pinned layers ---------------------------------------------------------------


def test_pinned_layers_that_fit_are_kept_whole_and_never_shrunk():
    shrink = Shrinker()
    out = pack(
        [item("sys", 30, 9, pinned=True, floor=5), item("task", 20, 8, pinned=True, floor=5)], 50, shrink
    )
    assert out == {"sys": Outcome("kept", 30), "task": Outcome("kept", 20)}
    assert shrink.calls == []  # exactly filling the budget needs no cut


def test_pinned_layers_over_budget_are_cut_lowest_priority_first_to_what_is_needed():
    shrink = Shrinker()
    items = [item("sys", 30, 9, pinned=True, floor=10), item("task", 40, 5, pinned=True, floor=25)]
    out = pack(items, 60, shrink)
    # 10 tokens over: the lower-priority "task" gives them up; "sys" is not touched.
    assert shrink.calls == [("task", 30)]
    assert out == {"sys": Outcome("kept", 30), "task": Outcome("shrunk", 30, "pinned layers over budget")}


def test_pinned_cut_goes_to_the_floor_then_moves_to_the_next_pinned_layer():
    shrink = Shrinker()
    items = [
        item("sys", 30, 9, pinned=True, floor=10),
        item("task", 40, 5, pinned=True, floor=25),
        item("free", 5, 1),
    ]
    out = pack(items, 40, shrink)
    # 30 over: "task" only down to its floor 25 (15 saved), then "sys" 30 -> 15.
    assert shrink.calls == [("task", 25), ("sys", 15)]
    assert out["task"] == Outcome("shrunk", 25, "pinned layers over budget")
    assert out["sys"] == Outcome("shrunk", 15, "pinned layers over budget")
    assert out["free"].status == "dropped"  # no room left at all


def test_pinned_layer_whose_policy_saves_more_than_asked_spares_the_next_one():
    shrink = Shrinker(waste={"task": 12})  # asked for 30, the policy lands on 18
    items = [item("sys", 30, 9, pinned=True, floor=10), item("task", 40, 5, pinned=True, floor=0)]
    out = pack(items, 60, shrink)
    assert shrink.calls == [("task", 30)]
    assert out == {"sys": Outcome("kept", 30), "task": Outcome("shrunk", 18, "pinned layers over budget")}


def test_pinned_layer_at_its_floor_is_skipped_without_calling_shrink():
    shrink = Shrinker()
    items = [item("sys", 30, 9, pinned=True, floor=0), item("task", 40, 5, pinned=True)]  # task cannot be cut
    out = pack(items, 50, shrink)
    assert shrink.calls == [("sys", 10)]
    assert out == {"sys": Outcome("shrunk", 10, "pinned layers over budget"), "task": Outcome("kept", 40)}


def test_pinned_layer_whose_policy_refuses_or_does_not_shrink_counts_as_uncut():
    for shrink in (Shrinker(refuse={"task"}), Shrinker(waste={"task": -10})):  # None, or got == tokens
        items = [item("sys", 30, 9, pinned=True, floor=0), item("task", 40, 5, pinned=True, floor=0)]
        out = pack(items, 60, shrink)
        assert shrink.calls == [("task", 30), ("sys", 20)]
        assert out == {"sys": Outcome("shrunk", 20, "pinned layers over budget"), "task": Outcome("kept", 40)}


def test_pinned_layers_over_budget_even_at_their_floors_raise_with_the_numbers():
    shrink = Shrinker()
    items = [item("sys", 30, 9, pinned=True, floor=20), item("task", 40, 5, pinned=True, floor=25)]
    with pytest.raises(ContextBudgetError) as exc:
        pack(items, 44, shrink)
    # both cut to their floors (45 tokens): 1 token over the budget of 44.
    assert shrink.calls == [("task", 25), ("sys", 20)]
    assert str(exc.value) == (
        "pinned layers need 1 tokens more than the budget of 44 (sys=20, task=25); "
        "raise context.max_prompt_tokens or lower these layers' min_tokens"
    )


def test_pinned_ties_in_priority_are_cut_in_reverse_declaration_order():
    shrink = Shrinker()
    items = [item("a", 20, 5, pinned=True, floor=0, order=0), item("b", 20, 5, pinned=True, floor=0, order=1)]
    out = pack(items, 30, shrink)
    assert shrink.calls == [("b", 10)]
    assert out["a"] == Outcome("kept", 20)


# ---- rule 2: floors by priority, skipping misfits ------------------------------------------


def test_floor_exactly_equal_to_the_room_left_is_promised():
    shrink = Shrinker()
    out = pack([item("sys", 60, 9, pinned=True), item("a", 50, 5, floor=40)], 100, shrink)
    assert out["a"] == Outcome("shrunk", 40, "cut to fit 40 tokens")
    assert shrink.calls == [("a", 40)]


def test_a_floor_that_does_not_fit_is_dropped_but_later_layers_still_get_theirs():
    shrink = Shrinker()
    items = [item("big", 80, 9, floor=70), item("small", 30, 5, floor=10)]
    out = pack(items, 50, shrink)
    assert out["big"] == Outcome("dropped", 0, "its minimum (70 tokens) did not fit")
    assert out["small"] == Outcome("kept", 30)
    assert shrink.calls == []


def test_floors_are_promised_before_any_layer_grows():
    shrink = Shrinker()
    # a (high priority) would take everything if it grew first; b's floor is promised first.
    items = [item("a", 100, 9, floor=10), item("b", 100, 5, floor=30)]
    out = pack(items, 60, shrink)
    assert out["a"] == Outcome("shrunk", 30, "cut to fit 30 tokens")
    assert out["b"] == Outcome("shrunk", 30, "cut to fit 30 tokens")
    assert shrink.calls == [("a", 30), ("b", 30)]


# ---- rule 3: growth by priority --------------------------------------------------------------


def test_remaining_room_grows_layers_highest_priority_first():
    shrink = Shrinker()
    items = [item("low", 50, 1, floor=10), item("high", 50, 9, floor=10), item("mid", 50, 5, floor=10)]
    out = pack(items, 100, shrink)
    # floors 30, then 70 more: high grows by 40 to full, mid by 30 to 40, low stays at 10.
    assert out["high"] == Outcome("kept", 50)
    assert out["mid"] == Outcome("shrunk", 40, "cut to fit 40 tokens")
    assert out["low"] == Outcome("shrunk", 10, "cut to fit 10 tokens")
    assert shrink.calls == [("mid", 40), ("low", 10)]


def test_equal_priorities_follow_declaration_order():
    shrink = Shrinker()
    items = [item("second", 50, 5, floor=0, order=1), item("first", 50, 5, floor=0, order=0)]
    out = pack(items, 60, shrink)
    assert out["first"] == Outcome("kept", 50)
    assert out["second"] == Outcome("shrunk", 10, "cut to fit 10 tokens")


def test_everything_fits_means_nothing_is_cut():
    shrink = Shrinker()
    items = [item("a", 10, 1, floor=0), item("b", 20, 2, floor=5), item("p", 5, 3, pinned=True)]
    out = pack(items, 35, shrink)
    assert out == {"p": Outcome("kept", 5), "a": Outcome("kept", 10), "b": Outcome("kept", 20)}
    assert shrink.calls == []


# ---- rule 4: unused tokens go to dropped layers ----------------------------------------------


def test_tokens_a_refusing_policy_gives_back_go_to_a_dropped_layer():
    shrink = Shrinker(refuse={"a"})
    items = [item("a", 100, 9, floor=20), item("b", 40, 5, floor=40)]
    out = pack(items, 50, shrink)
    # a promised 50 (floor 20 + growth 30), refuses -> dropped; its 50 tokens let b (floor 40) back in.
    assert out["a"] == Outcome("dropped", 0, "its policy could not cut it to 50 tokens")
    assert out["b"] == Outcome("kept", 40, "fit in unused room")
    # rule 4 offers the room to "a" first (higher priority); it refuses again, so "b" gets it.
    assert shrink.calls == [("a", 50), ("a", 50)]


def test_tokens_a_policy_leaves_unused_are_handed_on_and_cut_to_fit():
    shrink = Shrinker(waste={"a": 25})
    items = [item("a", 100, 9, floor=0), item("b", 60, 5, floor=20)]
    out = pack(items, 50, shrink)
    # b's floor (20) is promised, a grows to 30 and lands on 5: 25 spare tokens
    # go back to the pool, but b was not dropped, so nothing more happens to b.
    assert out["a"] == Outcome("shrunk", 5, "cut to fit 30 tokens")
    assert out["b"] == Outcome("shrunk", 20, "cut to fit 20 tokens")


def test_a_dropped_layer_is_cut_to_exactly_the_unused_room():
    shrink = Shrinker(waste={"a": 30})
    items = [item("a", 100, 9, floor=20), item("b", 60, 5, floor=25)]
    out = pack(items, 40, shrink)
    # b's floor 25 does not fit after a's 20 -> dropped; a grows to 40, lands on 10:
    # 30 unused >= b's floor 25 -> b cut to 30 in the unused room.
    assert out["a"] == Outcome("shrunk", 10, "cut to fit 40 tokens")
    assert out["b"] == Outcome("shrunk", 30, "fit in unused room")
    assert shrink.calls == [("a", 40), ("b", 30)]


def test_unused_room_is_consumed_in_priority_order_by_dropped_layers():
    shrink = Shrinker(refuse={"a"})
    items = [item("a", 100, 9, floor=60), item("b", 30, 5), item("c", 30, 4), item("d", 20, 3)]
    out = pack(items, 70, shrink)
    # a takes the whole room, refuses -> 70 back; b (30) and c (30) re-enter whole, d (20) no longer fits.
    assert out["a"].status == "dropped"
    assert out["b"] == Outcome("kept", 30, "fit in unused room")
    assert out["c"] == Outcome("kept", 30, "fit in unused room")
    assert out["d"] == Outcome("dropped", 0, "its minimum (20 tokens) did not fit")
    assert shrink.calls == [("a", 70), ("a", 70)]  # a is offered the room again first, and refuses


def test_a_dropped_layer_whose_floor_equals_the_unused_room_re_enters():
    shrink = Shrinker(waste={"a": 15})
    items = [item("a", 100, 9, floor=10), item("b", 40, 5, floor=15)]
    out = pack(items, 20, shrink)
    assert out["b"] == Outcome("shrunk", 15, "fit in unused room")
    assert shrink.calls == [("a", 20), ("b", 15)]


def test_room_given_back_by_several_layers_adds_up():
    # floors: a 60, b 20 (20 left), c (25, cannot be cut) dropped; a grows to 80.
    # a lands 5 under its target and b refuses its 20: 25 tokens free, exactly c's size.
    shrink = Shrinker(waste={"a": 5}, refuse={"b"})
    items = [item("a", 100, 9, floor=60), item("b", 100, 5, floor=20), item("c", 25, 3)]
    out = pack(items, 100, shrink)
    assert out["a"] == Outcome("shrunk", 75, "cut to fit 80 tokens")
    assert out["b"] == Outcome("dropped", 0, "its policy could not cut it to 20 tokens")
    assert out["c"] == Outcome("kept", 25, "fit in unused room")
    assert shrink.calls == [("a", 80), ("b", 20), ("b", 25)]

    # both land 5 under their targets: 10 tokens free, room for c (8 tokens, dropped at the floors).
    shrink = Shrinker(waste={"a": 5, "b": 5})
    items = [item("a", 100, 9, floor=60), item("b", 100, 5, floor=35), item("c", 8, 3)]
    out = pack(items, 100, shrink)
    assert out["a"] == Outcome("shrunk", 60, "cut to fit 65 tokens")
    assert out["b"] == Outcome("shrunk", 30, "cut to fit 35 tokens")
    assert out["c"] == Outcome("kept", 8, "fit in unused room")


def test_a_dropped_layer_whose_policy_refuses_the_unused_room_stays_dropped():
    shrink = Shrinker(waste={"a": 30}, refuse={"b"})
    items = [item("a", 100, 9, floor=20), item("b", 60, 5, floor=25)]
    out = pack(items, 40, shrink)
    assert out["b"] == Outcome("dropped", 0, "its minimum (25 tokens) did not fit")
    assert shrink.calls == [("a", 40), ("b", 30)]


def test_the_result_never_exceeds_the_limit_and_is_deterministic():
    items = [
        item("p", 15, 9, pinned=True, floor=5),
        item("a", 70, 7, floor=10),
        item("b", 40, 7, floor=30, order=1),
        item("c", 25, 3, floor=25),
        item("d", 12, 1, floor=0),
    ]
    for limit in range(0, 170, 7):
        for waste in (0, 3):
            try:
                first = pack(items, limit, Shrinker(waste={"a": waste, "d": waste}))
            except ContextBudgetError:
                assert limit < 5  # only when the pinned floor itself does not fit
                continue
            again = pack(items, limit, Shrinker(waste={"a": waste, "d": waste}))
            assert first == again
            assert sum(o.tokens for o in first.values()) <= limit
            assert set(first) == {it.name for it in items}
