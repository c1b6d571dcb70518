"""The layer policies added since their mutation score was measured (docs/testing.md, "Scores"):
``head_sentences`` (issue 28), ``head_rows`` (issue 13) and ``whole_items`` (issue 28). Each test
names the cut it pins; the survivors of ``scripts/mutation.sh context/policies.py`` showed them
untested (a sentence mark dropped, ``find`` for ``rfind``, a head left-stripped, the equal-size
edge of a table, and ``whole_items`` reached by no focused test at all)."""

from __future__ import annotations

from ai_scientist.context.policies import Head, HeadRows, HeadSentences, PolicyParams, WholeItems

P = PolicyParams()


def marker(text: str, head: str) -> str:
    return f"{head}\n[... {len(text) - len(head)} more characters cut ...]"


# -- head_sentences -----------------------------------------------------------------------------


def test_head_sentences_keeps_the_whole_text_when_it_fits_exactly():
    text = "One. Two."
    assert HeadSentences.cut(text, len(text)) == text
    assert HeadSentences.cut(text, len(text) + 5) == text


def test_head_sentences_ends_at_the_last_sentence_end_not_the_first():
    text = "One. Two. Three four five"
    assert HeadSentences.cut(text, 20) == marker(text, "One. Two.")


def test_head_sentences_ends_at_each_kind_of_sentence_or_line_end():
    # without the mark each would fall back to the last space: "Stop! Go on", "Why? Go on", "Line one"
    for text, keep, head in [
        ("Stop! Go on and on", 12, "Stop!"),
        ("Why? Go on and on", 11, "Why?"),
        ("Line one\nline two more", 15, "Line one"),
    ]:
        assert HeadSentences.cut(text, keep) == marker(text, head), text


def test_head_sentences_cuts_after_the_line_end_not_into_the_next_line():
    text = "Line\nabc def ghi"
    assert HeadSentences.cut(text, 8) == marker(text, "Line")


def test_head_sentences_takes_a_line_end_at_the_very_start_over_a_cut_mid_word():
    text = "\nSupercalifragilistic expialidocious"
    assert HeadSentences.cut(text, 10) == marker(text, "")


def test_head_sentences_falls_back_to_a_word_boundary_then_to_the_exact_character():
    text = "a bcdefgh ijk"  # the only space in the kept part is at index 1: cut after "a"
    assert HeadSentences.cut(text, 5) == marker(text, "a")
    text = " abcdefgh ijk"  # a space at index 0 is no word boundary: keep the 5 characters
    assert HeadSentences.cut(text, 5) == marker(text, " abcd")


def test_head_sentences_keeps_the_heads_leading_whitespace_and_counts_from_it():
    text = "  Lead text. Rest of it"
    assert HeadSentences.cut(text, 15) == marker(text, "  Lead text.")


def test_head_sentences_shrink_returns_none_when_nothing_fits_and_the_largest_fit_otherwise():
    text = "First sentence here. Second one follows. Third is long enough to be cut off for sure"
    assert HeadSentences().shrink(text, lambda c: False, P, None) is None
    got = HeadSentences().shrink(text, lambda c: len(c) <= 75, P, None)
    assert got is not None
    assert got[0] == marker(text, "First sentence here. Second one follows.")
    assert got[1].startswith("head kept up to ") and got[1].endswith(" chars, at a sentence end")


# -- head_rows ----------------------------------------------------------------------------------


def test_head_rows_keeps_every_row_when_keep_equals_the_row_count():
    table = ["| h |", "| r1 |", "| r2 |"]
    out = HeadRows.cut(table, 2)
    assert out == table and out is not table  # a copy: the caller's list is never changed
    assert HeadRows.cut(table, 1) == ["| h |", "| r1 |", "[... 1 lower-ranked rows cut (2 total) ...]"]


def test_head_rows_cuts_plain_text_as_head_does():
    text = "not a table but a plain string " * 4
    fits = lambda c: len(str(c)) <= 60  # noqa: E731
    got = HeadRows().shrink(text, fits, P, "h")
    assert got is not None and got == Head().shrink(text, fits, P, "h")
    assert got[0].startswith(text[: len(got[0].split("\n")[0])]) and "more characters cut" in got[0]


# -- whole_items --------------------------------------------------------------------------------

ITEMS = "fact a\n  detail a1\n\tdetail a2\nfact b\nfact c"
LONG = "\n".join(f"fact {c}: " + c * 60 for c in "abc")  # items longer than the marker


def test_whole_items_groups_indented_lines_under_the_item_above():
    assert WholeItems.items(ITEMS) == ["fact a\n  detail a1\n\tdetail a2", "fact b", "fact c"]
    assert WholeItems.items("  lead\nnext") == ["  lead", "next"]  # nothing above: its own item
    assert WholeItems.items("one") == ["one"]


def test_whole_items_cut_keeps_first_items_whole_and_counts_the_rest():
    assert WholeItems.cut(ITEMS, 3) == ITEMS
    assert WholeItems.cut(ITEMS, 4) == ITEMS
    assert WholeItems.cut(ITEMS, 1) == "fact a\n  detail a1\n\tdetail a2\n[... 2 more items not shown ...]"
    assert WholeItems.cut(ITEMS, 0) == "[... 3 more items not shown ...]"


def test_whole_items_shrink_on_text_keeps_the_most_whole_items_that_fit():
    two = LONG.rsplit("\n", 1)[0] + "\n[... 1 more items not shown ...]"
    got = WholeItems().shrink(LONG, lambda c: len(c) <= len(two), P, None)
    assert got == (two, "first 2 of 3 whole items kept")
    # only the marker alone fits: no item kept is no useful cut
    assert WholeItems().shrink(LONG, lambda c: len(c) <= 40, P, None) is None
    assert WholeItems().shrink(LONG, lambda c: False, P, None) is None


class Refits(str):
    """Text that renders itself within a size, dropping whole entries from the end (as the
    memory layer's MemoryText does)."""

    asked: list[int]

    def refit(self, max_chars: int) -> str:
        self.asked.append(max_chars)
        out: list[str] = []
        for e in self.split("\n"):
            if len("\n".join([*out, e])) > max_chars:
                break
            out.append(e)
        return "\n".join(out)


def refits(text: str) -> Refits:
    value = Refits(text)
    value.asked = []
    return value


def test_whole_items_asks_a_value_that_can_refit_and_says_within_how_many_chars():
    value = refits("alpha beta\ngamma delta\nepsilon zeta")
    got = WholeItems().shrink(value, lambda c: len(c) <= 25, P, None)
    assert got is not None
    assert got[0] == "alpha beta\ngamma delta"  # the value's own rendering, no marker added
    n = int(got[1].removeprefix("whole items kept within ").removesuffix(" chars"))
    assert got[1] == f"whole items kept within {n} chars"
    assert value.refit(n) == got[0] and len(value.refit(n + 1)) > 25  # the largest size that fits
    assert max(value.asked) <= len(value)
    # a refit that keeps nothing (only blanks) is no cut at all
    assert WholeItems().shrink(refits("too long an entry"), lambda c: len(c) <= 5, P, None) is None
