"""Relay session 9 findings the lead fixed (issue 28)."""

from __future__ import annotations

from ai_scientist.context.state import next_state


def test_a_fresh_history_says_it_starts_there_not_that_it_is_empty():
    # relay s9 ln 017: "Draft (fresh state):" over the draft's summary read as an empty history,
    # while the recall pointed at it ("its text is under 'History so far'")
    summary = "[n0002] trained 13 runs; val_accuracy 0.7925"
    text, _ = next_state(None, "draft", summary)
    first, rest = text.split("\n", 1)
    assert "fresh state" not in first  # a root appends to nothing: the entry starts the history
    assert first.startswith("Draft (") and "starts here" in first and rest.strip() == summary
    # a child that appends keeps its parent's state byte for byte and adds its own entry
    child, child_op = next_state(text, "tune", "[n0005] lr=0.05")
    assert (
        child_op == "append"
        and child.startswith(text.rstrip())
        and child.rstrip().endswith("[n0005] lr=0.05")
    )
