"""The ideation loop (after AI-Scientist-v2's template-free ideation): draft, search, refine, finalise.

For each idea, round 1 asks for a draft and an action; every later round shows
the draft again with the literature found so far and asks for a better draft
and the next action, up to ``rounds`` rounds. ``search`` runs the literature
tool; ``finalize`` ends the idea. Unlike v2, each round is a fresh assembled
prompt (draft + search results as layers, not a growing chat), so every call
has a ledger and a small model's context is not flooded by old turns.

Beyond v2: an idea finalised without any search gets its title searched, so
every idea carries novelty evidence; an idea that runs out of rounds keeps its
last draft with a note; duplicates (:mod:`dedupe`) are skipped, not written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..base.paths import NODES_DIR
from ..base.templates import render
from ..llm.call import CallContext, LLMError
from ..llm.prompting import Prompter
from .dedupe import duplicate_of
from .literature import Literature, Search, evidence
from .schema import ACTION_SCHEMA, EVIDENCE_KEY, check_answer, check_v2, to_v2

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

ROLE = "ideation"
PROMPT = "ideation"


class IdeaPrompts:
    """Assembles the ``ideation`` prompt (layers in ``context.spec``) through the run's one prompt
    path (:class:`~ai_scientist.llm.prompting.Prompter`): the ideation role's model decides the
    budget and the token counter, as for every other call."""

    def __init__(self, cfg: Config, llm: LLMClient):
        self.cfg = cfg
        self.prompter = Prompter(cfg, llm)

    def build(self, instructions: str, values: dict[str, Any]) -> tuple[list[dict], list[dict]]:
        v = dict(values)
        v["agent_role"] = "ideation agent"  # the run's system layer, with the ideation persona below
        v["persona"] = render("ideation/system.j2")
        v["instructions"] = render(f"ideation/{instructions}.j2", **v)
        # the schema itself goes with the request (response_format, or the client's instruction
        # when the backend has none): inline as well, it cost ~3k tokens a round twice over
        v["response_format"] = render("ideation/response_format.j2", **v)
        p = self.prompter.assemble(PROMPT, v, role=ROLE)
        return p.messages, p.ledger


@dataclass
class Outcome:
    """What became of one idea: ``added``, ``duplicate`` (of ``reason``) or ``failed``."""

    idea_id: str
    status: str
    idea: dict[str, Any] | None = None
    reason: str = ""
    searches: list[Search] = field(default_factory=list)


def _brief(idea: dict[str, Any]) -> dict[str, str]:
    return {k: str(idea.get(k) or "") for k in ("Name", "Title", "Short Hypothesis")}


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def topic_brief(topic: str) -> str:
    """The topic without its ``Abstract`` section (AI-Scientist-v2's topic files have one): after
    the first round the draft carries the idea, and the abstract repeated every round cost its
    tokens each time. A topic without such a section is returned whole."""
    heads = list(_HEADING.finditer(topic))
    for i, h in enumerate(heads):
        if h.group(2).strip().lower().rstrip(":") == "abstract":
            level = len(h.group(1))
            end = next((n.start() for n in heads[i + 1 :] if len(n.group(1)) <= level), len(topic))
            cut = (topic[: h.start()] + topic[end:]).strip()
            return (
                cut + "\n\n(The topic's abstract was shown in round 1; your draft builds on it.)"
                if cut
                else topic
            )
    return topic


@dataclass
class Ideator:
    llm: LLMClient
    prompts: IdeaPrompts
    literature: Literature
    topic: str
    rounds: int
    on_event: Callable[[dict[str, Any]], None] = lambda event: None

    def run(self, num_ideas: int, known: list[dict[str, Any]], first: int = 1) -> Iterator[Outcome]:
        """Yield one Outcome per idea; ``known`` (earlier ideas) grows with each idea added."""
        for n in range(first, first + num_ideas):
            outcome = self.one_idea(f"idea{n:03d}", known)
            if outcome.idea is not None:
                dup = duplicate_of(outcome.idea, known)
                if dup is not None:
                    outcome.status, outcome.reason = "duplicate", dup[1]
                else:
                    known.append(outcome.idea)
            self.on_event({"type": "idea", "idea_id": outcome.idea_id, "status": outcome.status,
                           "reason": outcome.reason, "title": (outcome.idea or {}).get("Title")})  # fmt: skip
            yield outcome

    def one_idea(self, idea_id: str, known: list[dict[str, Any]]) -> Outcome:
        searches: list[Search] = []
        draft: dict[str, Any] | None = None
        notes: list[str] = []
        finalized, last_search, used = False, None, 0
        for r in range(1, self.rounds + 1):
            available = self.literature.available
            values = {
                "topic": self.topic if r == 1 else topic_brief(self.topic),
                "search_available": available,
                "search_note": ""
                if available
                else (self.literature.offline_note or self.literature.cascade.unavailable_reason()),
                "library": self.literature.cascade.has_library,
                "previous_ideas": [_brief(i) for i in known],
                "idea_draft": draft,
                "literature": [s.to_dict() for s in searches if s.status != "skipped"],
                "last_search": last_search.to_dict() if last_search else None,
                "round": r,
                "rounds": self.rounds,
            }
            messages, ledger = self.prompts.build("propose" if r == 1 else "reflect", values)
            ctx = CallContext(
                node_id=idea_id, stage="ideation", phase="ideation", label=f"round{r}", ledger=ledger
            )
            try:
                answer = self.llm.complete(
                    messages, role=ROLE, ctx=ctx, schema=ACTION_SCHEMA, validator=check_answer
                ).parsed
            except LLMError as exc:  # an unusable answer ends this idea, never the session
                notes.append(f"round {r}: no usable answer ({exc})")
                break
            used, draft = r, answer["idea"]
            if answer["action"] == "finalize":
                finalized = True
                break
            if not self.literature.available:
                last_search = None  # not offered any more: the round only refines the draft
                continue
            last_search = self._search(idea_id, answer["query"], searches)
        if draft is None:
            return Outcome(idea_id, "failed", reason="; ".join(notes) or "no draft", searches=searches)
        if not any(s.status != "skipped" for s in searches):
            notes.append("the model did not search; its title was searched as the novelty check")
            self._search(idea_id, str(draft.get("Title") or ""), searches)
        if not finalized and not any("no usable answer" in n for n in notes):
            notes.append(f"not finalised within {self.rounds} rounds: the last draft is kept")
        idea = to_v2(draft)
        problems = check_v2(idea)
        if problems:
            return Outcome(
                idea_id, "failed", reason="invalid idea: " + "; ".join(problems), searches=searches
            )
        ev = evidence(searches)
        ev.update(
            finalized=finalized, rounds_used=used, notes=ev["notes"] + notes, log=f"{NODES_DIR}/{idea_id}"
        )
        idea[EVIDENCE_KEY] = ev
        return Outcome(idea_id, "added", idea, searches=searches)

    def _search(self, idea_id: str, query: str, searches: list[Search]) -> Search:
        s = self.literature.search(query)
        searches.append(s)
        self.on_event({"type": "search", "idea_id": idea_id, "query": s.query, "status": s.status,
                       "papers": len(s.papers), "note": s.note})  # fmt: skip
        return s
