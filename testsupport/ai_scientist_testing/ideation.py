"""A scripted ideation model for tests: schema-valid answers that follow what the prompt shows.

Per idea (``ctx.node_id``) it drafts an idea from ``titles`` (one per idea, in
order), asks ``searches`` literature searches (one per round) and then
finalises; when its prompt says the search is unavailable for the session, it finalises at
once, as the prompt asks. A refined draft names, in ``Related Work``, the first paper title
it finds under "Literature search results" in the prompt it was sent, or says
the search was unavailable, so a test can check what reached the model.
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any

from .scripted import _text

if TYPE_CHECKING:
    from ai_scientist.llm.call import CallContext

_PAPER = re.compile(r"^1\. (.+?)(?: \(\d{4}.*)?$", re.M)
_DOWN = re.compile(r"literature search is unavailable in this session(?: \((.*?)\): do not ask)?")


class IdeationResponder:
    """``responder(messages, schema, ctx) -> str`` for ``ScriptedBackend``."""

    def __init__(self, titles: list[str], searches: int = 1, finalize: bool = True):
        self.titles = list(titles)
        self.searches = searches
        self.finalize = finalize
        self.order: list[str] = []  # idea ids in the order first seen
        self.prompts: list[tuple[str, str, str]] = []  # (idea id, label, user text)
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], schema: dict | None, ctx: CallContext) -> str:
        text = _text(messages)
        with self._lock:
            if ctx.node_id not in self.order:
                self.order.append(ctx.node_id)
            k = self.order.index(ctx.node_id)
            self.prompts.append((ctx.node_id, ctx.label, text))
        title = self.titles[k % len(self.titles)]
        rnd = int(re.sub(r"\D", "", ctx.label) or 1)
        searching = (rnd <= self.searches or not self.finalize) and not _DOWN.search(text)
        return json.dumps(
            {
                "thought": f"round {rnd}: {'search' if searching else 'finalize'}",
                "action": "search" if searching else "finalize",
                "query": f"{title} query {rnd}" if searching else "",
                "idea": self._idea(title, text),
            }
        )

    @staticmethod
    def _idea(title: str, prompt: str) -> dict[str, Any]:
        lit = prompt.split("## Literature search results", 1)
        if len(lit) == 2:
            section = lit[1].split("\n## ", 1)[0]
            m = _PAPER.search(section)
            related = f"Closest work: {m.group(1)}." if m else "Search unavailable: " + section.strip()[:200]
        elif _DOWN.search(prompt):
            related = f"Search unavailable: {_DOWN.search(prompt).group(1) or 'unavailable'}"  # type: ignore[union-attr]
        else:
            related = "Not searched yet."
        name = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")
        return {
            "Name": name,
            "Title": title,
            "Short Hypothesis": f"{title} holds on small benchmarks.",
            "Related Work": related,
            "Abstract": f"We test whether {title.lower()}.",
            "Experiments": [f"Compare {name} against a baseline on two datasets; metric: accuracy."],
            "Risk Factors and Limitations": ["The effect may be too small to measure."],
        }
