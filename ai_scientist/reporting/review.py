"""Review of the paper: an ensemble with reflections, a meta-review, a figure review.

The reviewers are framed for the venue of ``report.template`` (a workshop or a conference; the
form is NeurIPS-style) in the field of the run's kind of experiment (machine learning, high-
performance computing, computational science: :func:`venue`). They get the paper's LaTeX, the run's own records beside it (layer
``measured``: each stage's measurements and which of the paper's numbers no measurement matches,
:func:`measured_facts`) and its figures' captions, and the figures themselves when the review
model is the vision model that already saw them in the VLM step.
With a single review there is no meta-review: ``meta_review`` is null and ``decision`` is that
review's (an "area chair" restating one review would pass it off as a consensus).

``REVIEW_SCHEMA`` is the review form with its score ranges; every review the
model returns is validated against it by the LLM client. The result,
including the mean scores, the VLM check of figures against captions and
``reviewer`` (the model(s) that answered and the few-shot examples used, see
:mod:`.fewshot`), is written to ``review.json`` in the run directory.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, read_json
from ..base.paths import RunPaths
from ..context.budget import ContextBudgetError
from ..context.tokens import counter_for
from ..llm.call import CallContext, LLMError, LLMResult
from ..llm.client import backend_name
from ..llm.prompting import Prompter, ask
from ..llm.vision import is_vision_refusal
from . import prompts
from .claims import SELF_REPORTED, check_claims, grade_record
from .errors import StepFailed, StepSkipped
from .fewshot import FewShot, budget_examples, load_examples
from .images import image_part
from .runread import load_run, read_text, seed_statistic
from .vlm import NoVision, review_figures, run_kinds, vision_skip_reason
from .writeup import stage_summaries

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

SCORES = {
    "originality": (1, 4),
    "quality": (1, 4),
    "clarity": (1, 4),
    "significance": (1, 4),
    "soundness": (1, 4),
    "presentation": (1, 4),
    "contribution": (1, 4),
    "overall": (1, 10),
    "confidence": (1, 5),
}
_TEXT = ("summary",)
_LISTS = ("strengths", "weaknesses", "questions", "limitations")
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        # a review's own size: a summary paragraph, up to five bullets per list (a weak model
        # that fills every field to its bound still ends within a 4,096-token answer)
        "summary": {"type": "string", "maxLength": 1500},
        **{
            k: {"type": "array", "items": {"type": "string", "maxLength": 400}, "maxItems": 5} for k in _LISTS
        },
        "ethical_concerns": {"type": "boolean"},
        **{k: {"type": "integer", "minimum": lo, "maximum": hi} for k, (lo, hi) in SCORES.items()},
        "decision": {"type": "string", "enum": ["Accept", "Reject"]},
    },
    "required": ["summary", *_LISTS, "ethical_concerns", *SCORES, "decision"],
    "additionalProperties": False,
}
MAX_UNTRACED = 20  # untraced numbers named to the reviewers (the rest are counted)
# read at most this much of paper.tex (a guard against a runaway file); what a prompt shows of it is
# decided by the budget: the ``paper`` layer keeps its head and tail (context.spec)
PAPER_CHARS = 2_000_000


def check_review(review: Any) -> list[str]:
    """Problems of a review against REVIEW_SCHEMA (empty when valid); independent of the client."""
    if not isinstance(review, dict):
        return ["review is not a JSON object"]
    problems = [f"missing {k}" for k in REVIEW_SCHEMA["required"] if k not in review]
    for k, (lo, hi) in SCORES.items():
        v = review.get(k)
        if k in review and (not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi):
            problems.append(f"{k}={v!r} not an integer in [{lo}, {hi}]")
    for k in _LISTS:
        if k in review and not (isinstance(review[k], list) and all(isinstance(x, str) for x in review[k])):
            problems.append(f"{k} must be a list of strings")
    if "decision" in review and review["decision"] not in ("Accept", "Reject"):
        problems.append(f"decision={review['decision']!r} not Accept/Reject")
    if "ethical_concerns" in review and not isinstance(review["ethical_concerns"], bool):
        problems.append("ethical_concerns must be true/false")
    extra = set(review) - set(REVIEW_SCHEMA["properties"])
    problems += [f"unknown field {k}" for k in sorted(extra)]
    return problems


_PROMPTS = {
    "review_user.j2": "review",
    "review_reflect_user.j2": "review_reflect",
    "review_meta_user.j2": "review_meta",
}


def _ask(
    client: LLMClient,
    template: str,
    label: str,
    values: dict,
    ledger: list | None = None,
    models: set | None = None,
    prompter: Prompter | None = None,
    images: list[dict[str, Any]] | None = None,
    kept: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One review call, through the run's one prompt path (llm.prompting.ask): the prompt
    ``review`` / ``review_reflect`` / ``review_meta`` of the layer table, under the budget.
    ``images`` (the figures) follow the text; a server that refuses them gets the call again
    without them (the captions are in the text); ``kept`` is given the images that went."""
    prompter = prompter or _prompter(getattr(client, "cfg", None), client)

    def send(imgs: list[dict[str, Any]]) -> LLMResult:
        v = {**values, "instructions": prompts.render(template, **values, images_attached=bool(imgs))}
        ctx = CallContext(node_id="run", phase="review", label=label, ledger=list(ledger or []))
        return ask(client, prompter, _PROMPTS[template], v, role="review", ctx=ctx,
                   schema=REVIEW_SCHEMA, images=imgs or None)  # fmt: skip

    images = list(images or [])
    while True:
        try:
            result = send(images)
            break
        except ContextBudgetError:
            # the figures do not fit beside the paper under this model's budget (a small window):
            # fewer of them, then none (their captions stay in the text); nothing was sent yet
            if not images:
                raise
            images = images[: len(images) // 2]
        except LLMError as exc:
            if not (images and is_vision_refusal(exc)):
                raise
            images = []  # a server that refuses images: the same review without them
    if kept is not None:
        kept[:] = images
    if models is not None and result.model:
        models.add(result.model)
    review = result.parsed
    problems = check_review(review)
    if problems:  # the client validated already; a second check keeps review.json trustworthy
        raise LLMError(f"review {label} is not schema-valid: {'; '.join(problems)}")
    return review


def _prompter(cfg: Config | None, client: LLMClient) -> Prompter:
    """The assembler of the review prompts: the run's budget and the review model's counter."""
    if cfg is None:
        from ..base.config import Config

        cfg = Config()
    return Prompter(cfg, client)


VENUES = {
    "workshop": "a {field} workshop (short papers; preliminary results are welcome when "
    "they are reported honestly)",
    "conference": "a {field} conference",
}
# the field of the venue, by the kind of experiment the run is (context/kinds.py): a relay run's
# reviewer of a cache-blocking benchmark was framed for a machine-learning venue
FIELDS = {
    "training": "machine-learning",
    "benchmark": "high-performance computing",
    "simulation": "computational science",
}


def venue(template: str, kinds: list[str]) -> str:
    """The venue the reviewers are framed for: ``report.template``'s form (workshop or conference)
    in the field of the run's first kind of experiment; machine learning when none is known."""
    field_name = FIELDS.get(kinds[0], FIELDS["training"]) if kinds else FIELDS["training"]
    return VENUES.get(template, VENUES["workshop"]).format(field=field_name)


@dataclass
class PaperView:
    """What a reviewer gets besides the LaTeX: ``values`` for the templates (venue, the
    figures' labels, files and captions) and the figures as image parts (none when the review
    model cannot see images)."""

    values: dict[str, Any] = field(default_factory=dict)
    images: list[dict[str, Any]] = field(default_factory=list)


def paper_view(run_dir: Path, cfg: Config, client: LLMClient) -> PaperView:
    """The venue (``report.template``), the paper's figures with their captions
    (``paper/writeup.json``), and their images when the review model is the vision model and the
    VLM step showed it images without a refusal (``figures/vlm.json`` has no ``skipped``)."""
    paths = RunPaths(run_dir)
    figures = (read_json(paths.writeup_json, default={}) or {}).get("figures") or []
    vlm = read_json(paths.vlm_json, default={}) or {}
    sees = (
        cfg.model_for("review") == cfg.model_for("vlm_feedback")
        and vision_skip_reason(cfg, client) is None
        and bool(vlm.get("figures"))
        and not vlm.get("skipped")
    )
    images = []
    if sees:
        for f in figures:
            try:
                images.append(image_part(paths.paper_figures / f["file"]))
            except OSError:
                continue
    values = {
        "venue": venue(cfg.report.template, run_kinds(run_dir)),
        "figures": [{k: f.get(k) for k in ("label", "file", "caption")} for f in figures],
        "measured": measured_facts(run_dir, cfg.agent.seed),
    }
    return PaperView(values, images)


def paper_claims(run_dir: Path) -> tuple[dict[str, Any] | None, str]:
    """(``paper/claims.json`` of the paper under review, why none): the claims step's file when it
    is at least as new as ``paper.tex``; else (a paper re-assembled since, a claims step that
    failed) the check is run again now, so the reviewers' facts are about the paper they read."""
    paths = RunPaths(run_dir)
    file = paths.paper / "claims.json"
    try:
        if file.exists() and file.stat().st_mtime >= paths.paper_tex.stat().st_mtime:
            claims = read_json(file, default=None)
            if isinstance(claims, dict) and isinstance(claims.get("claims"), list):
                return claims, ""
        writer = (read_json(paths.writeup_json, default={}) or {}).get("writer")
        return check_claims(run_dir, writer), ""
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def measured_facts(run_dir: Path, search_seed: int | None = None) -> str:
    """The ``measured`` layer of every review prompt: what the run measured (per stage: node
    counts, the best node's metrics and seed statistic, every other good node's metrics, from
    :func:`writeup.stage_summaries`) and the check of the paper's numbers against it
    (:func:`paper_claims`: how many were traced, each untraced one with its context and the
    nearest measured values); with a grader, which numbers state only a program's self-reported
    value and which nodes' programs reported other values than the grader measured
    (``grade.json`` mismatches). The pipeline's records, not the authors' text: what the reviewer
    needs to tell a reported result from an invented one."""
    claims, why = paper_claims(run_dir)
    rows = (claims or {}).get("claims") or []
    unmatched = [c for c in rows if c.get("source") is None]
    view = load_run(run_dir)
    grades = {nid: grade_record(view, nid) for nid in view.nodes}
    try:
        stages, stages_error = stage_summaries(run_dir, search_seed), ""
    except (OSError, ValueError) as exc:  # a torn state.json: the review goes on without them
        stages, stages_error = [], f"{type(exc).__name__}: {exc}"
    mismatches = [{"node": nid, **m} for nid, g in grades.items() for m in g.get("mismatches") or []]
    return prompts.render(
        "review_measured.j2",
        claims=claims,
        claims_error=why,
        unmatched=unmatched[:MAX_UNTRACED],
        unmatched_more=max(0, len(unmatched) - MAX_UNTRACED),
        self_reported=[c for c in rows if c.get("kind") == SELF_REPORTED][:MAX_UNTRACED],
        # sentences whose comparison word their two traced numbers contradict (claims.comparisons)
        contradicted=list((claims or {}).get("contradictions") or [])[:MAX_UNTRACED],
        graded=any(isinstance(g.get("graded"), list) for g in grades.values()),
        mismatches=mismatches[:MAX_UNTRACED],
        mismatches_more=max(0, len(mismatches) - MAX_UNTRACED),
        stages=stages,
        stages_error=stages_error,
        seed_statistic=seed_statistic(view, search_seed),
    )


# the template's measuring machinery (reporting/latex.py reads the page geometry, each figure's
# height and where the text ends from the log): a relay run's reviewer called it noise in the paper
_MEASURING = (
    (re.compile(r"^\\typeout\{ai-scientist-[^\n]*\n", re.M), ""),
    (re.compile(r"^\\par\\ifdefined\\pdfsavepos[^\n]*\n", re.M), ""),
    (re.compile(r"^\\box0\n", re.M), ""),
    (re.compile(r"\\setbox0\\vbox\{\\centering"), r"\\centering"),
    (re.compile(r"(\\label\{fig:[^}\n]*\})\}%$", re.M), r"\1"),
)


def reviewer_source(tex: str) -> str:
    """The paper's LaTeX as a reviewer reads it: the source without the lines the pipeline adds to
    measure the layout (``\\typeout{ai-scientist-...}``, the figures' measuring box, the text's end
    position). Every word, number, figure and caption stays."""
    for pattern, repl in _MEASURING:
        tex = pattern.sub(repl, tex)
    return tex


def one_review(
    client: LLMClient,
    paper: str,
    index: int,
    reflections: int,
    fewshot: FewShot | None = None,
    models: set | None = None,
    prompter: Prompter | None = None,
    seen: PaperView | None = None,
) -> dict[str, Any]:
    """One reviewer: a first review (with the few-shot examples, if any, and the figures of
    ``seen``) and ``reflections`` rounds of self-critique."""
    fs = fewshot or FewShot()
    seen = seen or PaperView()
    values: dict[str, Any] = {**seen.values, "paper": paper, "fewshot": fs.examples}
    kept: list[dict[str, Any]] = []  # the figures the first review saw: each reflection sees them too
    review = _ask(
        client, "review_user.j2", f"review_{index}", values, fs.ledger, models, prompter, seen.images, kept
    )
    changed: list[str] = []  # what the last round changed in the review (the paper never changes)
    for r in range(reflections):
        values = {**seen.values, "paper": paper, "review_so_far": review, "round": r + 1, "changed": changed}
        revised = _ask(
            client,
            "review_reflect_user.j2",
            f"review_{index}_reflect_{r + 1}",
            values,
            models=models,
            prompter=prompter,
            images=kept,
        )
        changed = [k for k in REVIEW_SCHEMA["properties"] if revised.get(k) != review.get(k)]
        review = revised
        if not changed:  # the review stood: another round would send the same request again
            break
    return review


def mean_scores(reviews: list[dict[str, Any]]) -> dict[str, float]:
    return {k: round(statistics.fmean(r[k] for r in reviews), 3) for k in SCORES}


def review_paper(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    """Run the ensemble, meta-review and figure review; writes and returns ``review.json``."""
    run_dir = Path(run_dir)
    rcfg = cfg.report
    paper = reviewer_source(read_text(RunPaths(run_dir).paper_tex, PAPER_CHARS))
    if not paper:
        raise StepSkipped("no paper/paper.tex to review (the writeup step did not produce one)")
    if rcfg.num_reviews == 0:
        raise StepSkipped("report.num_reviews is 0")
    fewshot = _fewshot(cfg, client)
    prompter = _prompter(cfg, client)
    seen = paper_view(run_dir, cfg, client)
    models: set[str] = set()
    reviews, errors = [], []
    for i in range(1, rcfg.num_reviews + 1):
        try:
            reviews.append(
                one_review(client, paper, i, rcfg.num_reflections, fewshot, models, prompter, seen)
            )
        except LLMError as exc:
            errors.append(f"reviewer {i}: {exc}")
    if not reviews:
        raise StepFailed(f"every reviewer failed: {'; '.join(errors)}")
    meta = None
    if len(reviews) > 1:  # one review has no consensus to summarise: it is the decision
        meta = _ask(
            client,
            "review_meta_user.j2",
            "meta_review",
            {**seen.values, "paper": paper, "reviews": reviews},
            models=models,
            prompter=prompter,
        )
    result: dict[str, Any] = {
        "reviewer": {
            "models": sorted(models) or [cfg.model_for("review")],
            "backend": backend_name(client),
            "fewshot": fewshot.summary or None,
        },
        "reviews": reviews,
        "errors": errors,
        "meta_review": meta,
        "meta_review_note": None if meta else "one review: no meta-review; the decision is that review's",
        "mean_scores": mean_scores(reviews),
        "decision": (meta or reviews[0])["decision"],
        "figure_review": _figure_review(run_dir, cfg, client),
    }
    atomic_write_json(RunPaths(run_dir).review, result)
    return result


def _fewshot(cfg: Config, client: LLMClient) -> FewShot:
    """The few-shot examples of ``report.review``, fitted to their token budget (none when unset)."""
    rv = cfg.report.review
    if not rv.fewshot_dir or rv.fewshot_max_examples == 0:
        return FewShot()
    backend = getattr(client, "backend", None)
    counter = counter_for(cfg.model_for("review"), getattr(backend, "count_tokens", None))
    fs = budget_examples(
        load_examples(rv.fewshot_dir), counter, rv.fewshot_max_tokens, rv.fewshot_max_examples
    )
    fs.summary["dir"] = str(rv.fewshot_dir)
    return fs


def _figure_review(run_dir: Path, cfg: Config, client: LLMClient) -> dict[str, Any]:
    figures = (read_json(RunPaths(run_dir).writeup_json, default={}) or {}).get("figures") or []
    if not figures:
        return {"skipped": "the paper has no figures"}
    reason = vision_skip_reason(cfg, client)
    if reason:
        return {"skipped": reason}
    try:
        return {"figures": review_figures(run_dir, cfg, client, figures, phase="review")}
    except NoVision as exc:
        return {"skipped": str(exc)}
