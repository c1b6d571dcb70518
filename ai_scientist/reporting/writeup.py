"""The paper: context from the run, citations, sections from the LLM, compiled PDF.

Citations are gathered over up to ``report.citations.rounds`` rounds (each
round sees what was found and asks for what is missing; papers deduplicated
by id and title; entries failing the BibTeX check dropped). Figures that are
perceptual duplicates of another are removed and the writer is told. After a
clean compile, ``report.writeup_reflections`` rounds feed the paper's problems
(unreferenced figures, the VLM's figure/caption findings, chktex warnings, a
page overrun; :mod:`.reflection`; and every number no measurement of the run
matches, with the nearest measured values: :mod:`.claims`) back to the writer.
The model (role ``writeup``) fills the sections as JSON; the ``.tex`` is
assembled from ``prompt/reporting/latex/<report.template>.tex.j2`` (``workshop``: one
column, ``conference``: two columns) with every string made
safe by :func:`latex.latex_text`. Compile errors and page-limit overruns go
back to the model with the precise log excerpt for up to
``report.compile_fix_rounds`` rounds. LaTeX is checked before any token.
"""

from __future__ import annotations

import difflib
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import CodeAnswer, read_artifact
from ..base.errors import ConfigError
from ..base.fileio import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json, read_jsonl
from ..base.paths import CODE_FILE, RunPaths
from ..context.kinds import experiment_kinds
from ..literature.cascade import Machine, build
from ..literature.sources import SourceError, SourceOffline
from ..llm.call import CallContext
from ..llm.client import backend_name
from ..llm.prompting import Prompter, ask
from ..treesearch.best import NodeCounts
from ..treesearch.seeds import (
    by_dataset,
    concurrency_text,
    dominance_text,
    ratio_text,
    rerun_text,
    seed_draw,
    too_wide_text,
)
from ..treesearch.tried import sentences
from . import latex, prompts
from .citations import check_bibtex, collect, first_author, to_bibtex, unknown_cite_keys
from .claims import SELF_REPORTED, WRITER_INPUTS, check_claims
from .errors import StepFailed, StepSkipped
from .images import duplicate_figures
from .reflection import (
    HEADINGS_MARGIN,
    WORDS_RULE,
    chktex_for_writer,
    overflow_message,
    paper_feedback,
    room_message,
    word_count,
)
from .runread import RunView, load_run, read_text, seed_statistic, seed_statistics
from .vlm import machine_facts

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

SECTIONS = ("introduction", "related_work", "method", "experiments", "results", "conclusion")
SECTION_TITLES = {"related_work": "Related Work"}
STAGE_NAMES = {1: "initial implementation", 2: "baseline tuning", 3: "creative research", 4: "ablations"}
SECTION_MAX_CHARS = 20_000
CHARS_PER_TOKEN = 4  # English prose; what the answer's characters may be, per token of max_tokens


def writeup_schema(max_tokens: int | None = None, labels: list[str] | None = None) -> dict[str, Any]:
    """The writer's answer. With ``max_tokens`` (a grammar-constrained local model), every
    section's bound is its share of what fits in ``max_tokens``, so the whole answer ends before
    the cut: a small model that repeats itself fills each section to its bound, and a bound of
    20,000 characters per section ran to ``max_tokens`` (or past ``llm.timeout_s``) and was asked
    again. A capable model chooses its lengths, so without ``max_tokens`` each section may take
    20,000 characters. With figure ``labels``, ``omit_figures`` (optional) lists the figures the
    paper leaves out: room for the text when the pages are over."""
    per_section = SECTION_MAX_CHARS
    if max_tokens:
        room = max_tokens * CHARS_PER_TOKEN - 300 - 2_000 - 400  # title, abstract, the JSON itself
        per_section = max(200, min(SECTION_MAX_CHARS, room // len(SECTIONS)))
    omit = (
        {
            "omit_figures": {
                "type": "array",
                "items": {"type": "string", "enum": list(labels)},
                "maxItems": len(labels),
                # a relay run's writer asked whether a figure left out in one repair stays out
                "description": "the labels of the figures this answer's paper leaves out; each answer "
                "gives the whole list (a figure left out before and not listed here comes back)",
            }
        }
        if labels
        else {}
    )
    return {
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 300},
            "abstract": {"type": "string", "maxLength": 2_000},  # ~300 words: longer is no abstract
            **{k: {"type": "string", "maxLength": per_section} for k in SECTIONS},
            **omit,
        },
        "required": ["title", "abstract", *SECTIONS],
        "additionalProperties": False,
    }


WRITEUP_SCHEMA: dict[str, Any] = writeup_schema()
# the queries one citation round searches: the schema, the search and the citer's system message
# (prompt/reporting/citation_system.j2) say the same number (relay s7 ln1 038: "at most 5" vs 10)
MAX_QUERIES = 6
ACCOUNT_CHARS = 1500  # a stage-end summary's field, in the writer's findings
BEST_SUMMARY_CHARS = 2000  # a stage best's findings, in the writer's and the citer's inputs
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "queries": {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": MAX_QUERIES}
    },
    "required": ["queries"],
    "additionalProperties": False,
}


@dataclass
class ReportOptions:
    """Machine-level knobs not in the config: where tools and the literature services are."""

    tool_path: str | None = None  # PATH-like lookup for LaTeX tools; None = $PATH, "" = none
    s2_base_url: str | None = None  # Semantic Scholar's URL (None = the public API)
    # {source: URL}: a URL given replaces the public service; when any is given (here or
    # s2_base_url), the sources without one are not contacted (tests, an institute's mirror)
    base_urls: Mapping[str, str] | None = None
    environ: Mapping[str, str] | None = None  # where the keys are read (None = os.environ)
    sleep: Callable[[float], None] = time.sleep  # the sources' back-off waits

    def machine(self) -> Machine:
        urls = dict(self.base_urls or {})
        if self.s2_base_url:
            urls["semantic_scholar"] = self.s2_base_url
        return Machine(base_urls=urls or None, environ=self.environ, sleep=self.sleep)


MAX_NODES_PER_STAGE = 12  # good nodes listed per stage, best first (the findings layer cuts at its tail)
METHOD_CODE_CHARS = 12_000  # the best node's program shown to the writer
OTHER_CODE_CHARS = 3_000  # how the program of another node the summaries name differs from it
OTHER_CODE_TOTAL = 12_000  # ... for all of them together; the nodes past it are named
NODE_SUMMARY_CHARS = (
    900  # a node's findings whole (the review's 500, a measurement caveat's 300), cut at a sentence
)


def metrics_text(metrics: list[dict[str, Any]], same_as: dict[str, Any] | None = None, of: str = "") -> str:
    """Every metric of a node, ``; ``-separated ``name=value``, ``↓`` after one where lower is
    better, its dataset said once for each run of metrics that share it (``a=1 [synthetic]; b=2``: a
    capable model's writer prompt repeated ``↑ (synthetic)`` after each of 49 metrics). With
    ``same_as`` (name -> value of the node ``of``), the metrics with the same value there are
    counted, not repeated (never the first, the node's headline): a stage-3 node re-ran its
    parent's grid unchanged beside its new conditions."""
    items: list[tuple[str, str, str | None]] = []
    same = 0
    for i, m in enumerate(metrics):
        value = m.get("value")
        if i and same_as is not None and same_as.get(str(m.get("name"))) == value:  # the headline stays
            same += 1
            continue
        shown = f"{value:.6g}" if isinstance(value, (int, float)) else str(value)
        # a diagnostic (direction "none") has no better side: the writer must not call it a gain
        arrow = {"minimize": "↓", "none": " (no better side)"}.get(str(m.get("direction")), "")
        items.append((f"{m.get('name', 'metric')}={shown}{arrow}", "", m.get("dataset") or None))
    text = "; ".join(by_dataset(items))
    if same:
        text += f"{'; ' if text else ''}{same} metric{'' if same == 1 else 's'} equal to {of}'s"
    return text or "no metric"


def _values(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    return {str(m.get("name")): m.get("value") for m in metrics}


def _alike(node: dict[str, Any], row: dict[str, Any], shown: dict[str, str]) -> tuple[str, str] | None:
    """(the stage's best, its re-run text) for a child of that best: the re-run metrics the two
    share value for value are counted in the child's text, not repeated."""
    best = row.get("best_node")
    return (best, shown[best]) if best and node.get("parent_id") == best and best in shown else None


def stage_summaries(run_dir: Path, search_seed: int | None = None) -> list[dict[str, Any]]:
    """Per stage: node counts (search nodes; seed re-runs apart), the best node the stage's end
    chose (its metrics and seed statistic), every good search node best first (summary and all
    its metrics: a control or a sweep point bears on the idea even when it is not the best; the
    metrics it shares with the stage's best, value for value, counted), each node with its seed
    re-runs (``reruns``: every metric as the run's one seed statistic, :data:`SEED_STATISTIC`), and
    (``account``) what the summary role wrote at the stage's end (``stage_summaries/stage<N>.json``:
    tried / worked / failed / next), when the stage has one. The same counts and best node as the
    status line, the stage facts and the run's last lines (:mod:`ai_scientist.treesearch.best`).
    ``search_seed``: the search runs' SEED, for what one SEED draws beside the first noise band."""
    view = load_run(run_dir)
    best = view.best_per_stage()
    counts = view.counts()
    typed = {n.id: n for n in view.typed()}
    paths = RunPaths(run_dir)
    state_stages = (read_json(paths.state, default={}) or {}).get("stages") or {}

    def reruns(nid: str, same_as: tuple[str, str] | None = None) -> str | None:
        node = typed.get(nid)
        seeds = [typed[s["id"]] for s in view.seed_runs(nid) if s["id"] in typed]
        if node is None:
            return None
        # the metrics its parent did not report (its own finding) with their re-run values too
        parent = typed.get(node.parent_id) if node.parent_id else None
        return rerun_text(node, seeds, same_as=same_as, parent=parent)

    shown_reruns: dict[str, str] = {}  # the best nodes' re-run texts, by id
    noise = _stage_noise(paths, view, search_seed)

    out = []
    for stage in sorted(set(counts) | set(best)):
        row: dict[str, Any] = {
            "stage": stage,
            "name": STAGE_NAMES.get(stage, f"stage {stage}"),
            **counts.get(stage, NodeCounts()).to_dict(),
        }
        written = read_json(paths.stage_summary(stage))
        if isinstance(written, dict) and isinstance(written.get("summary"), dict):
            # whole (the summary's schema bounds each field at 1,200), a longer one cut at a
            # sentence and marked: never mid-number (relay s8 mm2 048)
            row["account"] = {k: sentences(str(v), ACCOUNT_CHARS) for k, v in written["summary"].items() if v}
        best_values: dict[str, Any] = {}
        if stage in best:
            b = best[stage]
            best_values = _values(view.metrics(b["id"]))
            row.update(
                best_node=b["id"],
                best_from_stage=b.get("stage") if b.get("stage") != stage else None,
                # whole (a very long one ends at a sentence): cut at 800 characters it ended
                # mid-word ("losses") in the writer's and the citer's findings (relay s7 ln1 038, 040)
                summary=sentences(b.get("summary") or "", BEST_SUMMARY_CHARS),
                metrics=metrics_text(view.metrics(b["id"])),
            )
            agg = seed_statistics(view, state_stages.get(str(stage)) or {}, b["id"])
            if agg:
                row["seeds"] = agg
            text = shown_reruns.get(b["id"]) or reruns(b["id"])
            if text:
                shown_reruns[b["id"]] = text
                if not row["best_from_stage"]:
                    row["reruns"] = text
        ranked = view.ranked_good(stage)
        row["good_nodes"] = [
            {
                "id": n["id"],
                "operation": n.get("operation"),
                "idea": (n.get("idea") or "")[:200],
                "summary": sentences(n.get("summary") or "", NODE_SUMMARY_CHARS),
                # a child of the best that re-ran its grid: those metrics counted, not repeated
                "metrics": metrics_text(view.metrics(n["id"]), best_values, str(row.get("best_node")))
                if n.get("parent_id") == row.get("best_node")
                else metrics_text(view.metrics(n["id"])),
                **({"reruns": t} if (t := reruns(n["id"], _alike(n, row, shown_reruns))) else {}),
            }
            for n in ranked[:MAX_NODES_PER_STAGE]
            if n["id"] != row.get("best_node")
        ]
        row["good_nodes_left_out"] = max(0, len(ranked) - MAX_NODES_PER_STAGE)
        if stage in noise:
            row["noise"] = noise[stage]
        out.append(row)
    return out


def _stage_noise(
    paths: RunPaths, view: RunView | None = None, search_seed: int | None = None
) -> dict[int, str]:
    """Per stage, the seed-noise estimate its end re-ranked with (its last ``seed_rerank`` event),
    as one sentence: sigma, what it was pooled from, and the largest difference of two single runs
    inside it. A relay run's writer saw the stage summaries quote the band, never the sigma the
    node prompts had given, so a paper quoting it was flagged. Beside the first band whose runs
    show it, once, what one SEED draws (:func:`~ai_scientist.treesearch.seeds.seed_draw`, the
    sentence the search prompts give beside their band): the band holds the data's variation."""
    out: dict[int, str] = {}
    drawn, drawn_at = "", None  # what one SEED draws: said once, beside the first band that has it
    idea = read_text(paths.idea_md, 8000)
    nodes = view.typed() if view is not None else {}  # no view: no SEED-draw sentence
    for e in read_jsonl(paths.events):
        noise = e.get("noise") if e.get("type") == "seed_rerank" else None
        if not isinstance(noise, dict) or not isinstance(noise.get("sigma"), (int, float)):
            continue
        if not isinstance(e.get("stage"), int):
            continue
        groups = noise.get("groups") or {}
        runs = sum(len(v) for v in groups.values() if isinstance(v, list))
        text = (
            f"sigma {noise['sigma']:.4g} ({noise.get('estimator') or 'pooled standard deviation'}; "
            f"{len(groups)} node{'' if len(groups) == 1 else 's'}, {runs} re-run values)"
        )
        # one node's spread driving sigma, a band as wide as the values, and whether the re-runs
        # shared the machine: said as the stage facts say them (relay s6 mm 009, 019, 028)
        driven = dominance_text(
            {str(k): [float(x) for x in v] for k, v in groups.items() if isinstance(v, list)}
        )
        if driven:
            text += f"; {driven}"
        ref: dict[str, Any] = e["reference"] if isinstance(e.get("reference"), dict) else {}
        how = f"{e.get('noise_z', 2)} x sigma x sqrt 2"
        if isinstance(e.get("threshold"), (int, float)):
            wide = (
                too_wide_text(
                    float(e["threshold"]), float(ref["value"]), f"{e.get('node_id')}'s {ref.get('from')}", how
                )
                if isinstance(ref.get("value"), (int, float))
                else ""
            )
            text += (
                f"; {wide}: no single-seed difference between these nodes is a gain or a loss"
                if wide
                else f"; two single runs within {e['threshold']:.4g} of each other ({how}) are within the noise"
            )
        conc = concurrency_text(e.get("concurrency"))
        if conc:
            text += f"; {conc}"
        ratios: dict[str, Any] = e["ratios"] if isinstance(e.get("ratios"), dict) else {}
        for nid, parts in ratios.items():
            text += f"; {ratio_text(str(nid), parts)}"
        metric = e.get("metric")
        if not drawn and isinstance(metric, list) and len(metric) == 3:
            key = (str(metric[0]), str(metric[1]), None if metric[2] is None else str(metric[2]))
            draw = seed_draw([n for n in nodes if n.stage <= int(e["stage"])], key, search_seed)
            if draw is not None:
                kinds = experiment_kinds([key[0]], idea)
                drawn, drawn_at = (
                    draw.text("data" if not kinds or "training" in kinds else "inputs"),
                    e["stage"],
                )
        if drawn and drawn_at == e["stage"]:  # a stage's later re-rank replaces its line: kept there
            text += f"; {drawn}"
        out[int(e["stage"])] = text
    return out


def paper_figures(run_dir: Path) -> list[dict[str, Any]]:
    """Kept figures, with the VLM's suggested caption where it judged the original wrong."""
    paths = RunPaths(run_dir)
    figs = (read_json(paths.figures_json, default={}) or {}).get("figures", [])
    vlm = (read_json(paths.vlm_json, default={}) or {}).get("figures", {}) or {}
    out = []
    for i, fig in enumerate(figs, 1):
        review = vlm.get(fig["file"]) or {}
        caption = fig.get("caption", "")
        if review.get("caption_matches") is False and review.get("suggested_caption"):
            caption = review["suggested_caption"]
        out.append({"file": fig["file"], "caption": caption, "label": f"fig:{i}"})
    return out


def _unique_figures(run_dir: Path, figures: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Figures without perceptual duplicates (relabelled fig:1..n), and one message per duplicate
    removed; the messages go to the writer so the text does not present one plot as two results."""
    by_path = {RunPaths(run_dir).figures / f["file"]: f for f in figures}
    dups = duplicate_figures(list(by_path))
    gone = {later for _, later, _ in dups}
    notes = [
        f"{later.name} repeats {earlier.name} ({bits} of 256 perceptual-hash bits differ): removed; "
        f"describe that result once, with {earlier.name}"
        for earlier, later, bits in dups
    ]
    kept = [f for p, f in by_path.items() if p not in gone]
    return [{**f, "label": f"fig:{i}"} for i, f in enumerate(kept, 1)], notes


def gather_citations(
    run_dir: Path, cfg: Config, client: LLMClient, ctx_values: dict, opts: ReportOptions
) -> tuple[list, str]:
    """(papers with bibtex keys, notice). The user's library (``report.references``) is searched
    first, then the services of ``report.citations.sources``; with no library and no service
    answering, no query is asked of the model and the notice says why."""
    ccfg = cfg.report.citations
    if not ccfg.enabled:
        return [], "citations disabled (report.citations.enabled=false)"
    try:
        cascade = build(cfg, RunPaths(run_dir).s2_cache, opts.machine())  # one folder per source
    except ConfigError as exc:  # the library changed since the run started: say so, write on
        return [], f"citations skipped: {exc}"
    if not cascade.has_library:
        for src in list(cascade.sources):  # one answering service is enough to start
            try:
                src.probe()
                break
            except (SourceOffline, SourceError) as exc:
                cascade.skip(src, str(exc))
        if not cascade.available:
            return [], f"citations skipped: {cascade.unavailable_reason()}"
    papers: list[dict[str, Any]] = []
    asked: list[str] = []
    hits: dict[str, int] = {}  # query -> the papers its search returned, new or not
    seen: set[str] = set()
    keys: set[str] = set()
    rounds = 0
    prompter = Prompter(cfg, client)  # the run's one prompt path: budget, counter, ledger
    base = {
        "task": ctx_values.get("idea") or "(no idea text)",
        "instructions": prompts.render("citation_instructions.j2"),
        "findings": prompts.render("citation_user.j2", **ctx_values),
    }
    for rnd in range(1, ccfg.rounds + 1):
        # each query with what it found (relay s10 ln 041: titles alone did not tell which of
        # round 1's queries had failed, e.g. nothing on Polyak averaging came back)
        searched = [
            {
                "query": q,
                "found": [
                    {"title": p.get("title"), "year": p.get("year")} for p in papers if p.get("query") == q
                ],
                "hits": hits.get(q, 0),
            }
            for q in asked
        ]
        brief = prompts.render("citation_round.j2", searched=searched, round=rnd, rounds=ccfg.rounds)
        ctx = CallContext(node_id="run", phase="writeup", label="citation_queries")
        answer = ask(
            client,
            prompter,
            "citation_queries",
            {**base, "node_brief": brief},
            role="citation",
            ctx=ctx,
            schema=QUERY_SCHEMA,
        ).parsed.get("queries", [])
        norm = {" ".join(q.lower().split()) for q in asked}
        queries = [str(q) for q in answer if str(q).strip() and " ".join(str(q).lower().split()) not in norm]
        rounds = rnd
        if not queries:
            break  # the model has nothing new to look for
        asked += queries[:MAX_QUERIES]
        try:
            new = collect(cascade, queries[:MAX_QUERIES], ccfg.max_results, seen, keys, hits)
        except SourceOffline:
            break  # every source is skipped now: keep what earlier rounds found
        papers += new
        if not new:
            break  # the searches found nothing not already cited
    papers, bad = _checked_bibtex(papers)
    labels = {s.name: s.label for s in cascade.sources}
    by = sorted({labels.get(s, s) for p in papers for s in p.get("sources") or []})
    notice = (
        f"{len(papers)} reference(s) from {', '.join(by) or 'no source'} for {len(asked)} queries "
        f"in {rounds} round(s)"
    )
    if not papers and not cascade.available:
        notice = f"citations skipped: {cascade.unavailable_reason()}"
    notes = cascade.notes + ([f"dropped {len(bad)} with a bad BibTeX entry: {'; '.join(bad)}"] if bad else [])
    return papers, "; ".join([notice, *notes])


LIBRARY_GIST_CHARS = 800  # of a paper of the user's library shown to the writer (its abstract or first page)


def _gist(p: dict[str, Any]) -> str:
    """What the writer reads of a reference: 200 characters of a found abstract; of the user's own
    library (no other text of it may be reachable), its abstract or its PDF's first page."""
    if "library" in (p.get("sources") or []):
        return (p.get("abstract") or p.get("text") or "")[:LIBRARY_GIST_CHARS]
    return (p.get("abstract") or "")[:200]


def _checked_bibtex(papers: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Papers whose BibTeX entry passes :func:`check_bibtex`, and why the others did not."""
    good, bad = [], []
    for p in papers:
        problems = check_bibtex(to_bibtex(p["key"], p))
        if problems:
            bad.append(f"{p['key']}: {', '.join(problems)}")
        else:
            good.append(p)
    return good, bad


def kept_figures(sections: dict, figures: list) -> list:
    """The figures the paper shows: all but those the writer's ``omit_figures`` lists."""
    omitted = set(sections.get("omit_figures") or [])
    return [f for f in figures if f["label"] not in omitted]


def assemble(sections: dict, figures: list, papers: list, page_limit: int, template: str = "workshop") -> str:
    """The full .tex from ``latex/<template>.tex.j2``; every LLM string passes through latex_text;
    the figures the writer left out (``omit_figures``) are not in it, nor usable as a \\ref."""
    figures = kept_figures(sections, figures)
    keys = {p["key"] for p in papers}
    labels = {f["label"] for f in figures}
    esc = lambda s: latex.latex_text(s, keys, labels)  # noqa: E731
    body = [
        {
            "name": k,
            "title": SECTION_TITLES.get(k, k.replace("_", " ").title()),
            "text": esc(sections.get(k, "")),
        }
        for k in SECTIONS
    ]
    figs = [{**f, "caption": esc(f["caption"])} for f in figures]
    return latex.render_tex(
        f"{template}.tex.j2",
        title=esc(sections.get("title", "Untitled")),
        abstract=esc(sections.get("abstract", "")),
        sections=body,
        figures=figs,
        has_bib=bool(papers),
        page_limit=page_limit,
    )


def _own_texts(sections: dict, figures: list, papers: list) -> list[str]:
    """The writer's strings as :func:`assemble` puts them into the .tex (escaped)."""
    keys = {p["key"] for p in papers}
    labels = {f["label"] for f in kept_figures(sections, figures)}
    return [
        latex.latex_text(str(sections.get(k, "")), keys, labels) for k in ("title", "abstract", *SECTIONS)
    ]


def _tex_context(tex: str, excerpt: str, span: int = 4) -> str:
    """The .tex lines around each ``paper.tex:N:`` error in the log excerpt."""
    lines = tex.splitlines()
    out = []
    for n in sorted({int(m) for m in re.findall(r"paper\.tex:(\d+):", excerpt)})[:5]:
        lo, hi = max(1, n - span), min(len(lines), n + span)
        out.append("\n".join(f"{i:4d}| {lines[i - 1]}" for i in range(lo, hi + 1)))
    return "\n---\n".join(out)


def _sections_call(client: LLMClient, template: str, label: str, values: dict) -> dict[str, Any]:
    """One writer call through the run's one prompt path (prompt ``writeup``): the idea, the
    instructions and the run's findings are the same for every call of the writeup (a shared
    prefix); ``template`` renders this call's own request (draft, compile fix, reflection), last."""
    prompter = values.get("prompter") or Prompter(getattr(client, "cfg", None) or _default_cfg(), client)
    v = {
        **{k: x for k, x in values.items() if k != "prompter"},
        "task": values.get("idea") or "(no idea text)",
        # the commands inline math may use (anything else prints the span as plain text)
        "math_commands": " ".join(f"\\{c}" for c in sorted(latex.MATH_COMMANDS)),
        "instructions": prompts.render("writeup_instructions.j2", **values),
        # a compile fix (a LaTeX error, a page overrun) changes no number and adds no result: the
        # findings (~9k tokens in a relay run) are not sent again; a reflection round, which checks
        # numbers, gets them as the draft did, byte for byte (a prefix a cache serves)
        "findings": "" if values.get("without_findings") else prompts.render("writeup_user.j2", **values),
        "node_brief": prompts.render(template, **values),
    }
    ctx = CallContext(node_id="run", phase="writeup", label=label)
    labels = [f["label"] for f in values.get("figures") or []]
    local = backend_name(client) == "local"
    schema = writeup_schema(prompter.cfg.agent.writeup.max_tokens if local else None, labels)
    parsed = ask(client, prompter, "writeup", v, role="writeup", ctx=ctx, schema=schema).parsed
    out: dict[str, Any] = {k: str(parsed.get(k, "")) for k in ("title", "abstract", *SECTIONS)}
    omit = [x for x in parsed.get("omit_figures") or [] if x in labels]
    if omit:
        out["omit_figures"] = omit
    return out


def _program(run_dir: Path, node_id: str) -> dict[str, str]:
    """A node's program as its code answer wrote it: path -> text (text files only)."""
    answer = read_artifact(RunPaths(run_dir).node(node_id).file(CODE_FILE), CodeAnswer)
    return {f.path: f.content for f in (answer.files if answer is not None else ()) if f.is_text}


def _difference(best: dict[str, str], theirs: dict[str, str], best_id: str, their_id: str, limit: int) -> str:
    """How the program ``theirs`` differs from ``best`` (node ``best_id``'s, shown whole): a unified
    diff of each changed file with one line of context, a file the best has not in full; at most
    ``limit`` characters, a cut said with what it left out."""
    parts: list[str] = []
    for path in sorted(set(best) | set(theirs)):
        if path not in theirs:
            parts.append(f"[{path}: not in this program]")
        elif path not in best:
            parts.append(f"{path} (not in {best_id}'s program):\n```\n{theirs[path].rstrip()}\n```")
        elif best[path] != theirs[path]:
            diff = difflib.unified_diff(
                best[path].splitlines(),
                theirs[path].splitlines(),
                f"{best_id}/{path}",
                f"{their_id}/{path}",
                n=1,
                lineterm="",
            )
            parts.append(f"```diff\n{chr(10).join(diff)}\n```")
    text = "\n".join(parts) or f"(the same program as {best_id}'s)"
    if len(text) <= limit:
        return text
    kept = text[:limit].rsplit("\n", 1)[0]
    return f"{kept}\n[... {len(text) - len(kept)} more characters of the difference not shown ...]"


def method_code(run_dir: Path, limit: int = METHOD_CODE_CHARS) -> dict[str, Any] | None:
    """The run's best node (the last stage's best) and its program's files as fenced blocks, at most
    ``limit`` characters, what does not fit named with its size: the Method section's details (how
    the data are drawn, sizes, the procedure) are in the code, not in the metrics (a relay run's
    writer had to leave the data description vague). ``others``: each other node the stage-end
    summaries name (:meth:`RunView.named_in_summaries`), with how its program differs from the
    best's (:data:`OTHER_CODE_CHARS` each): a paper's central result can be another node's (relay
    s8 ln2 042, ln3 041: the writer saw only the best's program). None when no node worked."""
    view = load_run(run_dir)
    best = list(view.best_per_stage().values())
    if not best:
        return None
    nid = str(best[-1]["id"])
    program = _program(run_dir, nid)
    parts, left = [], limit
    for path, text in program.items():
        if left <= 0:
            parts.append(f"[{path}: {len(text)} characters not shown]")
            continue
        shown = text[:left]
        more = f"\n[... {len(text) - len(shown)} more characters not shown ...]" if shown != text else ""
        parts.append(f"{path}:\n```\n{shown.rstrip()}\n```{more}")
        left -= len(shown)
    if not parts:
        return None
    others: list[dict[str, str]] = []
    named = [o for o in view.named_in_summaries() if o != nid]
    room = OTHER_CODE_TOTAL
    unshown: list[str] = []
    for i, other in enumerate(named):
        if room <= 0:  # the rest named, not shown
            unshown = named[i:]
            break
        theirs = _program(run_dir, other)
        if theirs:
            text = _difference(program, theirs, nid, other, min(OTHER_CODE_CHARS, room))
            others.append({"node_id": other, "text": text})
            room -= len(text)
    return {"node_id": nid, "text": "\n".join(parts), "others": others, "others_left": unshown}


SHOWN_PROBE_CHARS = 60  # a memory note whose first characters the findings already hold repeats them

# the memory events the journal holds too (a node's creation, its metric): the stage results say them
JOURNAL_EVENTS = ("node_created", "metric")
_EVENT_LINE = re.compile(r"^- \S+ \[(\w+)\] (.*)$")
_IMPORTANCE = re.compile(r" \(importance \d+\)$")  # the store's ranking of a core fact, not a fact
_LESSON_ID = re.compile(r"^- a\d+: ")  # an archival id the writer cannot look up


def _repeats(line: str, held: str) -> bool:
    """Whether the digest line ``line`` says nothing the findings ``held`` (whitespace folded) do
    not: a journal event, or a note whose text (or its first :data:`SHOWN_PROBE_CHARS`
    characters) the findings hold."""
    event = _EVENT_LINE.match(line)
    if event and event.group(1) in JOURNAL_EVENTS:
        return True
    body = " ".join((event.group(2) if event else line.partition(": ")[2]).split())
    # a phase event: "node succeeded: <findings>"
    said = body.partition(": ")[2] if event and event.group(1) == "phase" else body
    probe = said[:SHOWN_PROBE_CHARS]
    return bool(said) and (said in held or (len(probe) == SHOWN_PROBE_CHARS and probe in held))


def writer_notes(digest: str, shown: str) -> str:
    """The memory digest's lines that tell the writer something the findings ``shown`` do not —
    core facts, lessons, summaries of earlier events, events other than the journal's own — under
    their headings; "" when none is left. Left out: the digest's title and lineage, "(none)", the
    count of other branches' lessons, the journal's events, a note whose text the findings hold, a
    core fact's importance, a lesson's id and a heading left empty. A relay run's writer got the
    best node's whole digest once it held one core fact: its lineage, creation, metric and success
    beside the stage results that say them (relay s9 ln2 041)."""
    held = " ".join(shown.split())
    out: list[str] = []
    heading = ""
    for line in digest.splitlines():
        text = line.strip()
        if not text.startswith("- ") or text == "- (none)":
            if text.startswith("## "):
                heading = text
            continue  # the title, the lineage, a count of other branches' lessons it cannot see
        if _repeats(text, held):
            continue
        if heading:
            out.append(heading)
            heading = ""
        out.append(_LESSON_ID.sub("- ", _IMPORTANCE.sub("", text)))
    return "\n".join(out)


NOTES_CHARS = 6000  # the memory notes shown to the writer


def _whole_lines(text: str, limit: int) -> str:
    """``text``'s lines while they fit in ``limit`` characters, then how many were left out: a
    note is never cut inside (relay s8 mm2 048: cut mid-metric, unmarked)."""
    lines, size = text.splitlines(), 0
    for i, line in enumerate(lines):
        size += len(line) + 1
        if size > limit:
            return "\n".join([*lines[:i], f"- ({len(lines) - i} more note lines not shown)"])
    return text


def _default_cfg() -> Config:
    from ..base.config import Config

    return Config()


def stage_paper_figures(run_dir: Path, opts: ReportOptions) -> tuple[list[dict[str, Any]], list[Any]]:
    """Before a paper is written (by a model or from the facts): LaTeX must be there (StepSkipped
    otherwise, before any call), and the run's figures, each once, are copied under
    ``paper/figures/``; returns (figures, the duplicates left out)."""
    ok, message = latex.preflight_latex(opts.tool_path)
    if not ok:
        raise StepSkipped(message)
    paths = RunPaths(run_dir)
    paths.paper_figures.mkdir(parents=True, exist_ok=True)
    figures, duplicates = _unique_figures(run_dir, paper_figures(run_dir))
    for fig in figures:
        shutil.copyfile(paths.figures / fig["file"], paths.paper_figures / fig["file"])
    return figures, duplicates


def _page_limit(cfg: Config) -> int:
    """report.page_limit as the config resolved it (the template's when null: never None)."""
    limit = cfg.report.page_limit
    if limit is None:
        raise ValueError("report.page_limit unresolved: the config validator sets the template's")
    return limit


def _build(
    paper_dir: Path,
    sections: dict,
    figures: list,
    papers: list,
    cfg: Config,
    opts: ReportOptions,
    before: tuple[int, int, float | None] | None = None,
) -> tuple[str, latex.CompileResult, str]:
    tex = assemble(sections, figures, papers, _page_limit(cfg), cfg.report.template)
    atomic_write_text(paper_dir / "paper.tex", tex)
    # .bbl/.blg too: a rebuild whose text no longer cites anything fails on the old bibtex state
    for stale in ("paper.pdf", "paper.aux", "paper.fdb_latexmk", "paper.fls", "paper.bbl", "paper.blg"):
        (paper_dir / stale).unlink(missing_ok=True)  # a stale PDF must never pass as this build
    result = latex.compile_pdf(paper_dir, cfg.exec.timeout, opts.tool_path)
    limit = _page_limit(cfg)
    if not result.ok:
        return tex, result, f"LaTeX compile failed. Log excerpt:\n{result.log_excerpt}"
    n = result.main_pages or result.pages or 0
    if n > limit:
        return (
            tex,
            result,
            overflow_message(
                n, limit, sections, result.figure_pages, result.figures, result.last_fill, before
            ),
        )
    return tex, result, ""


# ordinary prose of the words a results section uses: what a page of the template holds is measured
# with it (a word budget from the length of these words, not from a guess of words per page)
_PLACEHOLDER = (
    "The method was measured on every configuration of the study, and each result is reported with "
    "the seed statistics of its runs; the differences between the conditions are small compared "
    "with the spread of the repeated measurements. "
)
PLACEHOLDER_WORDS = 1400  # more than a page of text: the words a page holds are measured, not assumed
# the shape of a capable writer's text (relay runs s6-s7, six papers: abstracts of 150-214 words,
# paragraphs of 75-118 words): one paragraph a section packed 620 words a page where the writer's
# 14 paragraphs and abstract held 576 (s7 ln2 042 -> 043: a budget met and still a page over)
PLACEHOLDER_ABSTRACT = 170
PLACEHOLDER_PARAGRAPH = 85
FIT_BUILDS = 2  # builds of the placeholder at the budget: the budget is lowered until it fits


def _placeholder(words: int) -> dict[str, str]:
    """Placeholder sections of ``words`` words (as :func:`word_count` counts them): an abstract of
    :data:`PLACEHOLDER_ABSTRACT` words and the rest spread over the sections in paragraphs of
    :data:`PLACEHOLDER_PARAGRAPH` words, the shape a writer's text has."""
    vocab = _PLACEHOLDER.split()
    abstract = min(PLACEHOLDER_ABSTRACT, words // 4)
    each = max(words - abstract, len(SECTIONS)) // len(SECTIONS)

    def prose(n: int) -> str:
        ws = [vocab[i % len(vocab)] for i in range(n)]
        paras = [" ".join(ws[i : i + PLACEHOLDER_PARAGRAPH]) for i in range(0, n, PLACEHOLDER_PARAGRAPH)]
        return "\n\n".join(paras)

    return {"title": "Placeholder", "abstract": prose(abstract), **{k: prose(each) for k in SECTIONS}}


def _placeholder_build(
    paper_dir: Path, words: int, figures: list, cfg: Config, opts: ReportOptions
) -> tuple[int, latex.CompileResult]:
    """The placeholder of ``words`` words compiled with the figures: (its counted words, the
    build); the build's files are removed (the real build starts from nothing)."""
    placeholder = _placeholder(words)
    limit = _page_limit(cfg)
    atomic_write_text(paper_dir / "paper.tex", assemble(placeholder, figures, [], limit, cfg.report.template))
    try:
        result = latex.compile_pdf(paper_dir, cfg.exec.timeout, opts.tool_path)
    finally:
        for made in ("paper.pdf", "paper.aux", "paper.log", "paper.fdb_latexmk", "paper.fls", "paper.tex"):
            (paper_dir / made).unlink(missing_ok=True)
    return word_count(placeholder), result


def first_word_budget(paper_dir: Path, figures: list, cfg: Config, opts: ReportOptions) -> str:
    """The first writer call's word budget, measured on compiled placeholders shaped as a writer's
    text (:func:`_placeholder`): one of :data:`PLACEHOLDER_WORDS` words measures the pages the
    figures take (``latex.figure_pages``) and the words a page of text holds; the budget is the
    pages left to the text in words, less 5 % for headings (as the overflow message counts); then
    the placeholder of the budget's size is built (up to :data:`FIT_BUILDS` times) and, while it
    runs past the limit, the budget is lowered by its measured overflow — where the floats land
    decides too, which a rate per page does not see. "" when LaTeX is missing or the placeholder
    does not build. A relay run's writer, told only "fit in 4 pages", wrote a page too much while
    six figures took 1.9 pages (s7 ln1 040 -> 041); told 1251 words from one paragraph a section,
    it wrote 1235 and ran over (s7 ln2 042 -> 043)."""
    limit = _page_limit(cfg)
    counted, result = _placeholder_build(paper_dir, PLACEHOLDER_WORDS, figures, cfg, opts)
    if not result.ok or not result.main_pages:
        return ""
    fill = 1.0 if result.last_fill is None else max(0.05, min(1.0, result.last_fill))
    content = result.main_pages - 1 + fill
    figs = result.figure_pages or 0.0
    if figs >= content or figs >= limit:
        return (
            f"The {result.figures} figures alone take about {figs:.1f} of the {limit} pages: leave "
            "figures out (omit_figures) and keep the text to its essentials."
        )
    per_page = counted / (content - figs)
    budget = int(per_page * (limit - figs) * HEADINGS_MARGIN)
    for _ in range(FIT_BUILDS):
        counted, fit = _placeholder_build(paper_dir, budget, figures, cfg, opts)
        pages = fit.main_pages or fit.pages or 0
        if not fit.ok or not pages or pages <= limit:
            break
        over = pages - 1 + (1.0 if fit.last_fill is None else max(0.05, min(1.0, fit.last_fill))) - limit
        text_now = pages - 1 + (fit.last_fill or 1.0) - (fit.figure_pages or figs)
        rate = counted / text_now if text_now > 0 else per_page
        budget = max(int((counted - over * rate) * HEADINGS_MARGIN), 0)
        per_page = min(per_page, rate)
    shown = (
        f"the {result.figures} figure{' takes' if result.figures == 1 else 's take'} about {figs:.1f} "
        f"page{'' if round(figs, 1) == 1 else 's'} (a float never splits across pages), leaving "
        f"{limit - figs:.1f} for the text"
        if result.figures
        else f"there is no figure, so all {limit} pages are the text's"
    )
    return (
        f"Length: the paper has {limit} pages; {shown}. A page of this template holds about "
        f"{round(per_page)} words of text, so write at most {budget} words in all (5 % kept for "
        f"headings and paragraph breaks; measured by building the paper with the figures and text of "
        f"that length). {WORDS_RULE}"
    )


def _compile_with_fixes(
    client: LLMClient,
    paper_dir: Path,
    sections: dict,
    papers: list,
    values: dict,
    cfg: Config,
    opts: ReportOptions,
) -> tuple[dict, latex.CompileResult, list[str]]:
    """Build; on a compile error or page overrun ask for fixed sections, up to compile_fix_rounds times."""
    attempts: list[str] = []
    before: tuple[int, int, float | None] | None = None  # the last overrun: (words, pages, fill)
    for rnd in range(cfg.report.compile_fix_rounds + 1):
        tex, result, problem = _build(paper_dir, sections, values["figures"], papers, cfg, opts, before)
        if not problem:
            break
        pages = result.main_pages or result.pages
        before = (word_count(sections), pages, result.last_fill) if result.ok and pages else None
        attempts.append(problem)
        if rnd == cfg.report.compile_fix_rounds:
            break
        fix = {
            **values,
            "without_findings": True,
            "sections_json": sections,
            "problem": problem,
            "tex_context": _tex_context(tex, problem),
        }
        sections = _sections_call(client, "writeup_fix_user.j2", f"fix_{rnd + 1}", fix)
    return sections, result, attempts


_BUILD_FILES = ("paper.tex", "paper.pdf", "paper.aux", "paper.bbl", "paper.log")


def _snapshot(paper_dir: Path) -> dict[str, bytes]:
    return {n: (paper_dir / n).read_bytes() for n in _BUILD_FILES if (paper_dir / n).exists()}


def _restore(paper_dir: Path, files: dict[str, bytes]) -> None:
    """Put back the last good build (a rebuild could fail on what the failed one left behind)."""
    for n in _BUILD_FILES:
        (paper_dir / n).unlink(missing_ok=True)
    for n, data in files.items():
        atomic_write_bytes(paper_dir / n, data)


def _reflect(
    client: LLMClient,
    run_dir: Path,
    sections: dict,
    result: latex.CompileResult,
    papers: list,
    values: dict,
    cfg: Config,
    opts: ReportOptions,
) -> tuple[dict, latex.CompileResult, list[dict[str, Any]]]:
    """``report.writeup_reflections`` rounds on a compiled paper (see :mod:`.reflection`); a revision
    that no longer compiles is reverted, so the PDF left behind is always the last good one. The
    numbers of the paper no measurement of the run matches (:func:`claims.check_claims`, run on
    each build) go back to the writer with their context and the nearest measured values; each
    round's log names those it was given and those left after it (``unmatched_after``)."""
    paper_dir = RunPaths(run_dir).paper
    vlm = (read_json(RunPaths(run_dir).vlm_json, default={}) or {}).get("figures") or {}
    rounds = cfg.report.writeup_reflections
    log: list[dict[str, Any]] = []
    unmatched, contradicted = _checked(run_dir) if rounds else ([], [])
    for r in range(1, rounds + 1):
        pages = result.main_pages or result.pages
        tex = read_text(paper_dir / "paper.tex", 2_000_000)
        chktex = chktex_for_writer(
            result.chktex,
            tex,
            _own_texts(sections, values["figures"], papers),
            [str(sections.get(k, "")) for k in ("title", "abstract", *SECTIONS)],
        )
        feedback = paper_feedback(sections, kept_figures(sections, values["figures"]), vlm, chktex, pages,
                                  _page_limit(cfg), values["figure_problems"], result.figure_pages,
                                  result.last_fill)  # fmt: skip
        invented = _invented(sections, papers)
        if invented:  # removed from the .tex already (latex_text); the writer is told which
            feedback = [
                *feedback,
                prompts.render("citation_unknown.j2", invented=invented, papers=papers).strip(),
            ]
        entry: dict[str, Any] = {"round": r, "feedback": feedback, **_texts(unmatched)}
        if contradicted:
            entry["contradicted"] = [c["sentence"] for c in contradicted]
        if not feedback and not unmatched and not contradicted:
            log.append({**entry, "outcome": "nothing left to fix"})
            break
        good = _snapshot(paper_dir)
        ask = {
            **values,
            "sections_json": sections,
            "feedback": feedback,
            "unmatched": unmatched[:MAX_UNMATCHED],
            "unmatched_more": max(0, len(unmatched) - MAX_UNMATCHED),
            "contradicted": contradicted[:MAX_UNMATCHED],
            "round": r,
            "rounds": rounds,
            # the words it may add (a paper over the limit: the feedback's overflow says what to cut)
            "room": room_message(pages, _page_limit(cfg), sections, result.figure_pages, result.last_fill),
        }
        revised = _sections_call(client, "writeup_reflect_user.j2", f"reflect_{r}", ask)
        revised, new_result, attempts = _compile_with_fixes(
            client, paper_dir, revised, papers, values, cfg, opts
        )
        if not new_result.ok:
            _restore(paper_dir, good)
            log.append({**entry, "outcome": f"reverted: the revision did not compile ({attempts[-1][:300]})"})
            break
        sections, result = revised, new_result
        unmatched, contradicted = _checked(run_dir)  # the revision's numbers, checked again
        log.append(
            {
                **entry,
                "outcome": "applied",
                "failed_builds": len(attempts),
                **{f"{k}_after": v for k, v in _texts(unmatched).items()},
                "contradicted_after": [c["sentence"] for c in contradicted],
            }
        )
    return sections, result, log


MAX_UNMATCHED = 15  # unmatched numbers named in one reflection prompt (the rest are counted)


def _invented(sections: dict, papers: list) -> list[str]:
    """The ``\\cite`` keys of the writer's sections that no source returned (made up)."""
    texts = [str(sections.get(k, "")) for k in ("title", "abstract", *SECTIONS)]
    return unknown_cite_keys(texts, {p["key"] for p in papers})


def _checked(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The claims of the current ``paper.tex`` no measurement matches, and (with a grader) those
    only a program's self-reported value matches, each with its context and nearest measured
    values; and the sentences whose comparison word contradicts the two numbers it compares
    (``paper/claims.json`` is written; the claims step after the writeup checks the final paper
    again and records its own failure, so a check that fails here leaves the reflection to the
    paper's other problems)."""
    try:
        result = check_claims(run_dir, "model")
    except (OSError, ValueError):
        return [], []
    claims = result["claims"]
    flagged = [c for c in claims if c["source"] is None or c["kind"] == SELF_REPORTED]
    return flagged, list(result.get("contradictions") or [])


def _texts(flagged: list[dict[str, Any]]) -> dict[str, list[str]]:
    """A reflection round's log of the numbers it sent: ``unmatched`` (no measurement) and, when
    there are any, ``self_reported`` (only a program's own claim)."""
    out = {"unmatched": [c["text"] for c in flagged if c["source"] is None]}
    claimed = [c["text"] for c in flagged if c["source"] is not None]
    return out | ({"self_reported": claimed} if claimed else {})


def write_paper(
    run_dir: Path,
    cfg: Config,
    client: LLMClient,
    *,
    memory_digest: str = "",
    options: ReportOptions | None = None,
) -> dict[str, Any]:
    """Write and compile ``paper/paper.pdf``; returns (and saves) ``paper/writeup.json``.

    Raises StepSkipped before any LLM call when LaTeX is missing, and
    StepFailed when no PDF compiled within the fix rounds.
    """
    opts = options or ReportOptions()
    run_dir = Path(run_dir)
    paths = RunPaths(run_dir)
    paper_dir = paths.paper
    figures, duplicates = stage_paper_figures(run_dir, opts)
    view = load_run(run_dir)
    values: dict[str, Any] = {
        "idea": read_text(paths.idea_md, 8000),
        "stages": stage_summaries(run_dir, cfg.agent.seed),
        "figures": figures,
        "figure_problems": duplicates,
        "memory_digest": "",
        "method_code": method_code(run_dir),
        # a benchmark's machine (cores, caches, vector width, peak): what its numbers are judged by
        "machine": machine_facts(run_dir, view),
        "seed_statistic": seed_statistic(view, cfg.agent.seed),
        "page_limit": cfg.report.page_limit,
        "template": cfg.report.template,
    }
    shown = prompts.render("writeup_user.j2", **values, papers=[])
    values["memory_digest"] = _whole_lines(writer_notes(memory_digest, shown), NOTES_CHARS)
    papers, notice = gather_citations(run_dir, cfg, client, values, opts)
    if papers:
        atomic_write_text(paper_dir / "references.bib", "".join(to_bibtex(p["key"], p) for p in papers))
    values["papers"] = [
        {k: p.get(k) for k in ("key", "title", "year", "venue")}
        | {"authors": first_author(p), "abstract": _gist(p)}
        for p in papers
    ]
    # what the writer is given, kept: every number in it is a source the claims check accepts
    atomic_write_text(paper_dir / WRITER_INPUTS, prompts.render("writeup_user.j2", **values))
    values["prompter"] = Prompter(cfg, client)
    values["word_budget"] = first_word_budget(paper_dir, values["figures"], cfg, opts)
    sections = _sections_call(client, "writeup_draft.j2", "sections", values)
    sections, result, attempts = _compile_with_fixes(client, paper_dir, sections, papers, values, cfg, opts)
    invented = _invented(sections, papers)
    reflections: list[dict[str, Any]] = []
    if result.ok:
        sections, result, reflections = _reflect(client, run_dir, sections, result, papers, values, cfg, opts)
    summary = {
        "writer": "model",
        "pdf": "paper/paper.pdf" if result.ok else None,
        "pages": result.pages,
        "main_pages": result.main_pages,
        "page_limit": cfg.report.page_limit,
        "template": cfg.report.template,
        "over_page_limit": bool(result.ok and (result.main_pages or result.pages or 0) > _page_limit(cfg)),
        "failed_builds": len(attempts),
        "problems": attempts,
        "chktex_warnings": result.chktex,
        "citations": notice,
        "references": [p["key"] for p in papers],
        # \\cite keys the writer made up (no source returned them): removed from the paper; the
        # first draft's, and those still in the final sections
        "invented_citations": {"draft": invented, "final": _invented(sections, papers)},
        "figures": kept_figures(sections, figures),
        "omitted_figures": list(sections.get("omit_figures") or []),  # the writer left them out
        "duplicate_figures": duplicates,
        "reflections": reflections,
        "sections": sections,
    }
    atomic_write_json(paths.writeup_json, summary)
    if not result.ok:
        raise StepFailed(
            f"paper/paper.tex did not compile after {len(attempts)} attempt(s): {attempts[-1][:1500]}"
        )
    return summary
