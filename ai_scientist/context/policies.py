"""Truncation policies: small strategies behind one interface, registered by name.

A policy works on a layer's *value* (before templating), in two steps:

* ``prepare(value, params, handle)`` applies the configured caps
  (``context.policies.*``) whatever the budget — e.g. seed 000's last-4000-chars
  window, seed 001's preview of tool outputs over 5000 chars;
* ``shrink(value, fits, params, handle)`` gets the ORIGINAL value (never an
  already-cut one, so the counts in markers stay true) and returns the largest
  version within the configured caps for which ``fits(candidate)`` holds (the
  caller renders and counts tokens), or None when the policy cannot make it fit.

Both return a short note for the ledger. Every cut leaves a marker in the text
saying how much was removed. Policies are pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..base.templates import as_text
from .json_preview import PreviewParams, minimal_preview, parse_json, preview_json, preview_ladder
from .reasoning import strip_value

Fits = Callable[[Any], bool]
Result = tuple[Any, str]  # (value, ledger note)


@dataclass(frozen=True)
class PolicyParams:
    """The knobs of ``context.policies`` (same names)."""

    tail_window_chars: int = 4000
    json_preview_threshold_chars: int = 5000
    json_preview_list_head: int = 2
    json_preview_string_cap: int = 500
    history_keep_turns: int = 8
    strip_reasoning: bool = True
    # the prompt's token budget (set by ``assemble``): a JSON value up to this many characters, about
    # a quarter of the budget, is shown whole; ``json_preview_threshold_chars`` is the floor
    budget_tokens: int = 0

    @property
    def json_threshold(self) -> int:
        return max(self.json_preview_threshold_chars, self.budget_tokens)

    @classmethod
    def from_config(cls, policies: Any) -> PolicyParams:
        if policies is None:
            return cls()
        return cls(**{f: getattr(policies, f) for f in cls.__dataclass_fields__ if hasattr(policies, f)})


def _largest(n_max: int, build: Callable[[int], Any], fits: Fits) -> tuple[Any, int] | None:
    """Binary search for the largest n in [0, n_max] with fits(build(n)); None if even 0 fails."""
    if not fits(build(0)):
        return None
    lo, hi = 0, n_max
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(build(mid)):
            lo = mid
        else:
            hi = mid - 1
    return build(lo), lo


class LayerPolicy:
    """Base: keep the value as it is; cannot shrink.

    A layer policy cuts one prompt layer; the tree-search policies that pick the next node
    are another thing (``treesearch.policies.SearchPolicy``)."""

    name = "none"
    cut_action = "truncated"

    def prepare(self, value: Any, params: PolicyParams, handle: str | None) -> Result | None:
        return None

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        return None


class TailWindow(LayerPolicy):
    """Keep the last N characters (seed 000): recent state matters most."""

    name = "tail"

    @staticmethod
    def cut(text: str, keep: int) -> str:
        if keep >= len(text):
            return text
        start = len(text) - keep
        nl = text.find("\n", start, start + max(1, keep // 10))
        if nl != -1:  # start on a line boundary when one is close
            start = nl + 1
        return f"[... {start} earlier characters cut; last {len(text) - start} kept ...]\n{text[start:]}"

    def prepare(self, value: Any, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        if len(text) <= params.tail_window_chars:
            return None
        return self.cut(text, params.tail_window_chars), f"tail window {params.tail_window_chars} chars"

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        n_max = min(len(text), params.tail_window_chars)
        found = _largest(n_max, lambda n: self.cut(text, n), fits)
        return None if found is None else (found[0], f"tail window cut to {found[1]} chars")


class Head(LayerPolicy):
    """Keep the first N characters: the start of a plan or memory block matters most."""

    name = "head"

    @staticmethod
    def cut(text: str, keep: int) -> str:
        if keep >= len(text):
            return text
        return f"{text[:keep]}\n[... {len(text) - keep} more characters cut ...]"

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        found = _largest(len(text), lambda n: self.cut(text, n), fits)
        return None if found is None else (found[0], f"head kept {found[1]} chars")


class HeadSentences(Head):
    """Keep the first N characters, ending at the last sentence or line end among them: a research
    idea cut mid-sentence ("A variant ## Instructions") reads as a different idea. Falls back to a
    word boundary, then to the exact character, when the kept text holds no such end."""

    name = "head_sentences"

    @staticmethod
    def cut(text: str, keep: int) -> str:
        if keep >= len(text):
            return text
        kept = text[:keep]
        end = max(kept.rfind(mark) for mark in (". ", ".\n", "! ", "? ", "\n"))
        if end >= 0:
            end += 1
        else:
            space = kept.rfind(" ")
            end = space if space > 0 else keep
        head = text[:end].rstrip()
        return f"{head}\n[... {len(text) - len(head)} more characters cut ...]"

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        found = _largest(len(text), lambda n: self.cut(text, n), fits)
        return None if found is None else (found[0], f"head kept up to {found[1]} chars, at a sentence end")


class HeadTail(LayerPolicy):
    """Keep the start and (twice as much of) the end: logs put errors last, context first."""

    name = "head_tail"

    @staticmethod
    def cut(text: str, keep: int) -> str:
        if keep >= len(text):
            return text
        head = keep // 3
        tail = keep - head
        return (
            f"{text[:head]}\n[... {len(text) - keep} characters cut from the middle ...]\n"
            f"{text[len(text) - tail :] if tail else ''}"
        )

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        found = _largest(len(text), lambda n: self.cut(text, n), fits)
        return None if found is None else (found[0], f"head+tail kept {found[1]} chars")


class JSONPreview(LayerPolicy):
    """Seed 001 generalised: structured preview of large JSON; head+tail for plain text."""

    name = "json_preview"
    cut_action = "previewed"

    @staticmethod
    def _params(params: PolicyParams) -> PreviewParams:
        return PreviewParams(params.json_preview_list_head, params.json_preview_string_cap)

    def prepare(self, value: Any, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        limit = params.json_threshold
        if len(text) <= limit:
            return None
        data = parse_json(value)
        if data is None:
            return HeadTail.cut(text, limit), f"text over {limit} chars: head+tail kept {limit}"
        preview = preview_json(data, self._params(params), handle, len(text))
        return preview, f"JSON over {limit} chars previewed"

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        text = as_text(value)
        data = parse_json(value)
        if data is None:
            limit = params.json_threshold
            found = _largest(min(len(text), limit), lambda n: HeadTail.cut(text, n), fits)
            return None if found is None else (found[0], f"text head+tail kept {found[1]} chars")
        original = len(text)
        for p in preview_ladder(self._params(params)):
            candidate = preview_json(data, p, handle, original)
            if fits(candidate):
                return (
                    candidate,
                    f"JSON previewed (first {p.list_head} + last item per list, strings <= {p.string_cap})",
                )
        candidate = minimal_preview(data, handle, original)
        return (candidate, "JSON reduced to its shape and handle") if fits(candidate) else None


class HistoryPrune(LayerPolicy):
    """Seed 001's message pruning for a list of turns/steps: keep the first and the last K.

    Each list item is one whole step (a command together with its result), so
    pruning never separates a call from its output. Plain text falls back to a tail window.
    """

    name = "history_prune"

    @staticmethod
    def prune(items: list[Any], keep: int) -> list[Any]:
        if len(items) <= keep + 1:
            return list(items)
        omitted = len(items) - keep - 1
        tail = items[len(items) - keep :] if keep else []
        return [items[0], f"[... {omitted} earlier steps omitted ({len(items)} total) ...]", *tail]

    def prepare(self, value: Any, params: PolicyParams, handle: str | None) -> Result | None:
        if not isinstance(value, list):
            return TailWindow().prepare(value, params, handle)
        if len(value) <= params.history_keep_turns + 1:
            return None
        kept = params.history_keep_turns
        return self.prune(value, kept), f"kept first + last {kept} of {len(value)} steps"

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        if not isinstance(value, list):
            return TailWindow().shrink(value, fits, params, handle)
        for keep in range(min(len(value) - 1, params.history_keep_turns), -1, -1):
            candidate = self.prune(value, keep)
            if fits(candidate):
                return candidate, f"kept first + last {keep} of {len(value)} steps"
        return None


class HeadRows(LayerPolicy):
    """A ranked table kept from the top: ``[header, row1, row2, ...]`` with the best row first.

    Cuts whole rows from the end (the worst, failed or still running ones, which come last), never
    the header, and says how many were cut. Plain text falls back to a head cut.
    """

    name = "head_rows"

    @staticmethod
    def cut(items: list[Any], keep: int) -> list[Any]:
        rows = len(items) - 1
        if keep >= rows:
            return list(items)
        return [*items[: keep + 1], f"[... {rows - keep} lower-ranked rows cut ({rows} total) ...]"]

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        if not isinstance(value, list) or not value:
            return Head().shrink(value, fits, params, handle)
        rows = len(value) - 1
        found = _largest(rows, lambda n: self.cut(value, n), fits)
        return None if found is None else (found[0], f"kept header + best {found[1]} of {rows} rows")


# the last line of a table whose rows are in creation order: the rows' keys (each row's first
# cell), best first (treesearch/tried.py tried_table)
RANK_LINE = "Ranked best first: "


class RankRows(LayerPolicy):
    """A table ``[header, row, ..., ranking]`` whose rows are in creation order — a new row comes
    last, so the next prompt's table extends this one's and the prefix cache keeps it — and whose
    last line (:data:`RANK_LINE`) names the rows' keys (their first cells) best first.

    Cuts whole rows, the lowest-ranked first (rows the ranking does not name — failed or still
    running — before any it names, the newest of them first), keeps the others in their order and
    the header, names only the kept rows in the ranking line (none for one) and says how many were
    cut: what
    ``head_rows`` keeps of a table sorted by rank. Without a ranking line it is ``head_rows``.
    """

    name = "rank_rows"

    @staticmethod
    def _key(row: Any) -> str:
        cells = str(row).split("|")
        return cells[1].strip() if len(cells) > 2 else ""

    @staticmethod
    def _ranked(ranking: str) -> dict[str, int]:
        """The ranking line's keys -> their place (0 = best); lines after it are a note."""
        keys = ranking.split("\n", 1)[0][len(RANK_LINE) :].rstrip(".").split(",")
        return {k.strip(): i for i, k in enumerate(keys) if k.strip()}

    @classmethod
    def cut_order(cls, rows: list[Any], ranking: str) -> list[int]:
        """Row indices, the first to cut first."""
        place = cls._ranked(ranking)
        unnamed = [i for i in reversed(range(len(rows))) if cls._key(rows[i]) not in place]
        named = sorted(
            (i for i in range(len(rows)) if cls._key(rows[i]) in place),
            key=lambda i: place[cls._key(rows[i])],
        )
        return [*unnamed, *reversed(named)]

    @classmethod
    def cut(cls, items: list[Any], keep: int) -> list[Any]:
        header, rows, ranking = items[0], list(items[1:-1]), str(items[-1])
        if keep >= len(rows):
            return list(items)
        order = cls.cut_order(rows, ranking)
        gone = set(order[: len(rows) - keep])
        kept = [r for i, r in enumerate(rows) if i not in gone]
        place = cls._ranked(ranking)
        named = sorted((cls._key(r) for r in kept if cls._key(r) in place), key=place.__getitem__)
        marker = f"[... {len(rows) - keep} lower-ranked rows cut ({len(rows)} total) ...]"
        # a ranking of one row says nothing the row does not (nor its note on the order)
        note = ranking.partition("\n")[2]
        line = RANK_LINE + ", ".join(named) + "." + (f"\n{note}" if note else "")
        return [header, *kept, marker, *([line] if len(named) > 1 else [])]

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        if not (isinstance(value, list) and len(value) >= 2 and str(value[-1]).startswith(RANK_LINE)):
            return HeadRows().shrink(value, fits, params, handle)
        rows = len(value) - 2
        found = _largest(rows, lambda n: self.cut(value, n), fits)
        return None if found is None else (found[0], f"kept header + best {found[1]} of {rows} rows")


class WholeItems(LayerPolicy):
    """Memory and other item lists: cut by whole items, never inside one (a fact, an event, a hit).

    A value that can render itself smaller (``refit(max_chars)``, the memory layer's
    :class:`~ai_scientist.memory.render.MemoryText`) is asked to, so it drops its least useful
    items and its headers stay true of what is shown. Any other text keeps its first whole
    items, an item being a line with the indented lines under it, and says how many were left out.
    """

    name = "whole_items"

    @staticmethod
    def items(text: str) -> list[str]:
        out: list[str] = []
        for line in text.split("\n"):
            if out and line[:1] in (" ", "\t"):  # a continuation belongs to the item above
                out[-1] += "\n" + line
            else:
                out.append(line)
        return out

    @classmethod
    def cut(cls, text: str, keep: int) -> str:
        items = cls.items(text)
        if keep >= len(items):
            return text
        return "\n".join([*items[:keep], f"[... {len(items) - keep} more items not shown ...]"])

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        refit = getattr(value, "refit", None)
        text = as_text(value)
        if callable(refit):
            found = _largest(len(text), refit, fits)
            if found is None or not found[0].strip():
                return None
            return found[0], f"whole items kept within {found[1]} chars"
        n = len(self.items(text))
        found = _largest(n, lambda k: self.cut(text, k), fits)
        if found is None or found[1] == 0:
            return None
        return found[0], f"first {found[1]} of {n} whole items kept"


class StripReasoning(LayerPolicy):
    """Seed 003: thinking is removed from what later prompts see (the log keeps it)."""

    name = "strip_reasoning"
    cut_action = "stripped"

    def prepare(self, value: Any, params: PolicyParams, handle: str | None) -> Result | None:
        if not params.strip_reasoning:
            return None
        clean, removed = strip_value(value)
        return (clean, f"reasoning stripped ({removed} chars)") if removed else None

    def shrink(self, value: Any, fits: Fits, params: PolicyParams, handle: str | None) -> Result | None:
        return TailWindow().shrink(value, fits, params, handle)


LAYER_POLICIES: dict[str, LayerPolicy] = {
    p.name: p
    for p in (
        LayerPolicy(),
        TailWindow(),
        Head(),
        HeadSentences(),
        HeadTail(),
        JSONPreview(),
        HistoryPrune(),
        HeadRows(),
        RankRows(),
        WholeItems(),
        StripReasoning(),
    )
}


def get_layer_policy(name: str) -> LayerPolicy:
    """The registered policy called ``name`` (a clear error lists the known names)."""
    try:
        return LAYER_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown context policy {name!r}; known: {', '.join(sorted(LAYER_POLICIES))}"
        ) from None
