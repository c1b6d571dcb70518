"""Few-shot reviews (``report.review.fewshot_dir``): example papers with their reviews, budgeted.

The directory holds pairs ``NAME.txt`` (or ``.md`` / ``.tex``: the paper's
text) and ``NAME.json`` (its review: any JSON object, or AI-Scientist-v2's
``{"review": "<JSON text>"}``). Pairs are taken in name order, at most
``fewshot_max_examples``, while their rendered text fits
``fewshot_max_tokens`` (counted with the review model's counter): an example
whose paper does not fit is cut at the head (its review is never cut), or
dropped when too little room is left. Every decision is one ledger entry, so
the review's prompt log shows what the examples cost and why one was cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..context.ledger import LedgerEntry
from ..context.tokens import TokenCounter
from . import prompts
from .errors import StepFailed

PAPER_SUFFIXES = (".txt", ".md", ".tex")
MIN_PAPER_CHARS = 400  # a paper cut below this teaches nothing: the example is dropped instead
MAX_FILE_CHARS = 200_000


@dataclass
class Example:
    name: str
    paper: str
    review: str


@dataclass
class FewShot:
    """The examples that go into the prompt, with their ledger and a summary for review.json."""

    examples: list[Example] = field(default_factory=list)
    ledger: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def _review_text(path: Path) -> str:
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS])
    except (OSError, json.JSONDecodeError) as exc:
        raise StepFailed(f"report.review.fewshot_dir: {path} is not readable JSON: {exc}") from None
    if isinstance(data, dict) and set(data) == {"review"}:  # v2's form: the review as a JSON string
        data = data["review"]
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError:
                return data.strip()
    if not isinstance(data, (dict, str)) or not data:
        raise StepFailed(f"report.review.fewshot_dir: {path} holds no review (a JSON object is expected)")
    return data.strip() if isinstance(data, str) else json.dumps(data, indent=2, ensure_ascii=False)


def load_examples(directory: str | Path) -> list[Example]:
    """The (paper, review) pairs of ``directory`` in name order; a missing or empty dir is StepFailed."""
    d = Path(directory).expanduser()
    if not d.is_dir():
        raise StepFailed(f"report.review.fewshot_dir: {d} is not a directory")
    out = []
    for review in sorted(d.glob("*.json")):
        paper = next((review.with_suffix(s) for s in PAPER_SUFFIXES if review.with_suffix(s).is_file()), None)
        if paper is None:
            continue  # a JSON without its paper is not an example (e.g. a notes file)
        text = paper.read_text(encoding="utf-8", errors="replace")[:MAX_FILE_CHARS].strip()
        if text:
            out.append(Example(review.stem, text, _review_text(review)))
    if not out:
        raise StepFailed(
            f"report.review.fewshot_dir: {d} has no example pairs (NAME.json with NAME.txt, .md or .tex)"
        )
    return out


def _render(ex: Example) -> str:
    return prompts.render("review_fewshot_example.j2", example=ex)


def _cut(ex: Example, keep: int) -> Example:
    cut = len(ex.paper) - keep
    return Example(
        ex.name, f"{ex.paper[:keep]}\n[... {cut} more characters of this example cut ...]", ex.review
    )


def budget_examples(
    examples: list[Example], counter: TokenCounter, max_tokens: int, max_examples: int
) -> FewShot:
    """Pick and cut examples to fit ``max_tokens``; pure apart from the counter."""
    fs = FewShot()
    left = max_tokens
    for i, ex in enumerate(examples):
        full = _render(ex)
        before = counter.count(full)
        entry: dict[str, Any] = {"layer": f"fewshot:{ex.name}", "policy": "head", "chars_before": len(full),
                 "tokens_before": before, "tokens_exact": counter.exact}  # fmt: skip
        chosen, reason = None, "fits"
        if i >= max_examples:
            reason = f"report.review.fewshot_max_examples is {max_examples}"
        elif before <= left:
            chosen = ex
        else:
            lo, hi = 0, len(ex.paper)  # the longest head of the paper that still fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if counter.count(_render(_cut(ex, mid))) <= left:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= MIN_PAPER_CHARS:
                chosen, reason = _cut(ex, lo), f"paper cut to {lo} chars to fit {left} tokens left"
            else:
                reason = f"needs {before} tokens, {left} left of report.review.fewshot_max_tokens"
        if chosen is None:
            fs.ledger.append(
                LedgerEntry(action="dropped", chars_after=0, tokens_after=0, reason=reason, **entry).to_dict()
            )
            fs.summary.setdefault("dropped", []).append({"name": ex.name, "reason": reason})
            continue
        text = _render(chosen)
        tokens = counter.count(text)
        left -= tokens
        action = "kept" if chosen is ex else "truncated"
        fs.ledger.append(
            LedgerEntry(
                action=action, chars_after=len(text), tokens_after=tokens, reason=reason, **entry
            ).to_dict()
        )
        fs.examples.append(chosen)
    fs.summary.update(
        examples=[e.name for e in fs.examples],
        tokens=max_tokens - left,
        budget_tokens=max_tokens,
        tokens_exact=counter.exact,
    )
    return fs
