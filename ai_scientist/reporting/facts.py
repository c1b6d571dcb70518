"""The facts writer: the paper written by the pipeline from the run's records, no LLM call.

``report.writer: facts`` (or ``auto`` with the embedded local model: :func:`resolve_writer`). The
paper uses the same LaTeX template as the model's (``latex/<report.template>.tex.j2``); its
sections come from ``latex/facts_sections.tex.j2``, filled with the run's records only:

- title and hypothesis from the idea (``idea.json`` / ``idea.md``);
- the method: the stages and their budgets (config), and per stage the best node, what it grew
  from and whether its code differs from its parent's (or the seed code); with a model other than
  the embedded one, its plan is quoted, marked as the code model's;
- the results: the run's best metric with its seed mean ± s.e. (:data:`runread.SEED_STATISTIC`)
  and a table per stage: every search node tried (best first, at most :data:`MAX_ROWS`), its
  status and metric, or why it failed; the node counts and the best node of
  :mod:`ai_scientist.treesearch.best`; the figures, captioned from their data;
- limitations: what this run could not show, derived from the same records.

Every number printed is a value the run recorded, so the claims check (:mod:`.claims`) matches
each one; node ids, file names and error messages are set in ``\\texttt`` (records, not claims).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import Plan, read_artifact
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import PLAN_FILE, NodePaths, RunPaths
from ..llm.client import backend_name
from ..treesearch.best import NodeCounts
from . import latex
from .claims import WRITER_INPUTS
from .errors import StepFailed
from .runread import SEED_STATISTIC, RunView, load_run, read_text, seed_statistics
from .writeup import STAGE_NAMES, ReportOptions, stage_paper_figures

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

MAX_ROWS = 10  # nodes listed per stage table (best first, then the failures); the rest are counted
REASON_CHARS = 110
PLAN_CHARS = 600
IDEA_CHARS = 1_500
CODE_SUFFIXES = (".py", ".c", ".cc", ".cpp", ".h", ".rs", ".go", ".jl", ".r", ".R", ".sh", ".js", ".ts")


def resolve_writer(cfg: Config, client: Any) -> tuple[str, str]:
    """(``model`` | ``facts``, why): ``report.writer``, with ``auto`` resolved by the backend."""
    chosen = cfg.report.writer
    if chosen != "auto":
        return chosen, f"report.writer={chosen}"
    backend = backend_name(client)
    if backend == "local":
        return "facts", "report.writer=auto and the writer model is the embedded local model"
    return "model", f"report.writer=auto and the writer model's backend is {backend or 'not local'}"


# ----------------------------------------------------------------- the facts --


@dataclass(frozen=True)
class NodeRow:
    """One search node of a stage table."""

    id: str
    operation: str
    parent: str | None
    status: str
    value: float | None
    best: bool
    reason: str  # why it failed ('' for a good node)


@dataclass(frozen=True)
class StageFacts:
    stage: int
    name: str
    counts: NodeCounts
    best: str | None
    best_from: int | None  # the stage the best node was created in, when an earlier one
    best_parent: str | None
    best_operation: str
    best_metrics: list[dict[str, Any]]
    seeds: dict[str, Any] | None  # the seed statistic (mean, stderr, n, values)
    seed_ids: list[int]
    code: str  # "same" | "changed" | "" (unknown), against the parent's (or the seed) code
    changed_files: list[str]
    plan: str
    rows: list[NodeRow]
    left_out: int


def _reason(error: str | None, status: str) -> str:
    if status == "good":
        return ""
    lines = [ln.strip() for ln in str(error or "").splitlines() if ln.strip()]
    if not lines:
        return "no reason recorded" if status == "buggy" else status
    text = lines[0] if len(lines) == 1 or lines[-1] in lines[0] else f"{lines[0]} ... {lines[-1]}"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 3] + "..."


def _code_files(ws: Path) -> dict[str, str]:
    if not ws.is_dir():
        return {}
    out = {}
    for p in sorted(ws.rglob("*")):
        rel = p.relative_to(ws)
        if any(
            part.startswith(".") or part in ("resources", "node_plots", "__pycache__") for part in rel.parts
        ):
            continue
        if p.is_file() and p.suffix in CODE_SUFFIXES and p.name != "plot_node.py":
            out[rel.as_posix()] = read_text(p, 400_000)
    return out


def _code_model(run_dir: Path, cfg: Config) -> str:
    """The model that wrote the nodes' code as the calls recorded it (a prompt log's ``model``: the
    embedded backend answers as ``local:<gguf file>`` whatever ``llm.model`` names), else the
    configured name."""
    paths = RunPaths(run_dir)
    for nid in paths.node_ids():
        for log in paths.node(nid).prompt_log_files():
            rec = read_json(log, default=None) or {}
            if rec.get("role") == "code" and rec.get("model"):
                return str(rec["model"])
    return cfg.model_for("code")


def code_change(run_dir: Path, view: RunView, node_id: str) -> tuple[str, list[str]]:
    """(``same`` | ``changed`` | '', changed files): the node's code against its parent's, or for a
    draft against the idea's seed code (``seed_code/``); '' when there is nothing to compare."""
    node = view.nodes.get(node_id) or {}
    mine = _code_files(NodePaths(view.node_dir(node_id)).workspace)
    parent = node.get("parent_id")
    if parent:
        theirs = _code_files(NodePaths(view.node_dir(parent)).workspace)
    else:
        seed = {
            p.name: read_text(p, 400_000)
            for p in sorted(RunPaths(run_dir).seed_code.glob("*"))
            if p.is_file()
        }
        if not seed or not mine:
            return "", []
        # the seed file may be staged under another name: compare contents
        changed = [name for name, text in mine.items() if text not in seed.values()]
        return ("same" if not changed else "changed"), changed
    if not mine or not theirs:
        return "", []
    changed = sorted(n for n in set(mine) | set(theirs) if mine.get(n) != theirs.get(n))
    return ("same" if not changed else "changed"), changed


def _plan_text(run_dir: Path, node_id: str) -> str:
    plan = read_artifact(RunPaths(run_dir).node(node_id).file(PLAN_FILE), Plan)
    if plan is None:
        return ""
    parts = [plan.goal_summary.strip(), plan.implementation_strategy.strip()]
    text = " ".join(p for p in parts if p)
    return text if len(text) <= PLAN_CHARS else text[:PLAN_CHARS] + " [...]"


def _value(view: RunView, node: dict[str, Any], name: str | None) -> float | None:
    for m in view.metrics(node["id"]):
        if isinstance(m.get("value"), (int, float)) and (name is None or m.get("name") == name):
            return float(m["value"])
    return None


def stage_facts(run_dir: Path, *, quote_plans: bool) -> list[StageFacts]:
    """Per stage, the facts the paper states (see the module docstring), from the journal,
    ``state.json`` and the nodes' files; counts and best node as :mod:`treesearch.best` defines."""
    view = load_run(run_dir)
    counts = view.counts()
    best = view.best_per_stage()
    state_stages = (read_json(RunPaths(run_dir).state, default={}) or {}).get("stages") or {}
    out = []
    for stage in sorted(set(counts) | set(best)):
        b = best.get(stage)
        metrics = view.metrics(b["id"]) if b else []
        name = metrics[0].get("name") if metrics else None
        ranked = view.ranked_good(stage)
        searched = [n for n in view.by_stage().get(stage, []) if n.get("operation") != "seed_eval"]
        # worked, but changed the stage's evaluation protocol: listed with why, never ranked
        apart = [n for n in searched if n.get("status") == "good" and n.get("incomparable")]
        failed = [n for n in searched if n.get("status") != "good"]
        listed = (ranked + apart + failed)[:MAX_ROWS]
        rows = [
            NodeRow(
                id=n["id"],
                operation=str(n.get("operation") or ""),
                parent=n.get("parent_id"),
                status="not comparable" if n.get("incomparable") else str(n.get("status") or ""),
                value=_value(view, n, name) if n.get("status") == "good" else None,
                best=bool(b and n["id"] == b["id"]),
                reason=str(n["incomparable"])[:REASON_CHARS]
                if n.get("incomparable")
                else _reason(n.get("error"), str(n.get("status") or "")),
            )
            for n in listed
        ]
        seeds = seed_statistics(view, state_stages.get(str(stage)) or {}, b["id"]) if b else None
        seed_ids = sorted(
            int(s["seed"]) for s in (view.seed_runs(b["id"]) if b else []) if isinstance(s.get("seed"), int)
        )
        code, changed = code_change(run_dir, view, b["id"]) if b else ("", [])
        origin = b.get("stage") if b else None
        out.append(
            StageFacts(
                stage=stage,
                name=STAGE_NAMES.get(stage, f"stage {stage}"),
                counts=counts.get(stage, NodeCounts()),
                best=b["id"] if b else None,
                best_from=origin if isinstance(origin, int) and origin != stage else None,
                best_parent=b.get("parent_id") if b else None,
                best_operation=str(b.get("operation") or "") if b else "",
                best_metrics=metrics,
                seeds=seeds,
                seed_ids=seed_ids,
                code=code,
                changed_files=changed,
                plan=_plan_text(run_dir, b["id"]) if b and quote_plans else "",
                rows=rows,
                left_out=max(0, len(ranked) + len(apart) + len(failed) - len(listed)),
            )
        )
    return out


def idea_parts(run_dir: Path) -> dict[str, str]:
    """title, hypothesis, experiments, related_work, risks of the run's idea (``idea.json``;
    ``idea.md``'s first heading as the title when there is no JSON)."""
    paths = RunPaths(run_dir)
    data = read_json(paths.idea_json, default=None)
    data = data if isinstance(data, dict) else {}
    md = read_text(paths.idea_md, 50_000)
    title = str(data.get("title") or data.get("Title") or "").strip()
    if not title:
        first = next((ln for ln in md.splitlines() if ln.startswith("# ")), "")
        title = first[2:].strip() or "Results of an automated research run"
    parts = {"title": title}
    for key, alt in (
        ("hypothesis", "Short Hypothesis"),
        ("abstract", "Abstract"),
        ("experiments", "Experiments"),
        ("related_work", "Related Work"),
        ("risks", "Risk Factors and Limitations"),
    ):
        text = str(data.get(key) or data.get(alt) or "").strip()
        parts[key] = _clip(text, IDEA_CHARS)
    if not parts["hypothesis"] and not parts["abstract"]:
        parts["abstract"] = _clip(md, IDEA_CHARS)
    return parts


def _clip(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, cut at a word (never inside a number), the cut saying
    how much of the idea it left out (relay s8 mm2 037: an unmarked cut mid-metric)."""
    if len(text) <= limit:
        return text
    kept = text[:limit]
    if not text[limit].isspace() and len(kept.split(None, 1)) > 1:  # inside a word: drop it
        kept = kept.rsplit(None, 1)[0]
    kept = kept.rstrip()
    return f"{kept} [... {len(text) - len(kept)} more characters of the idea not shown]"


def limitations(stages: list[StageFacts], figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the run could not show, as template keys with their values (rendered by the template)."""
    out: list[dict[str, Any]] = []
    final = next((s for s in reversed(stages) if s.best), None)
    if final and final.seeds:
        if int(final.seeds.get("n") or 0) < 3:
            out.append({"kind": "few_seeds", "n": final.seeds.get("n")})
        se = final.seeds.get("stderr")
        bests = [s for s in stages if s.best and s.best_metrics]
        values = {s.best: s.best_metrics[0].get("value") for s in bests}
        nums = [v for v in values.values() if isinstance(v, (int, float))]
        if isinstance(se, (int, float)) and len(nums) > 1 and max(nums) - min(nums) < 2 * se:
            out.append({"kind": "within_noise"})
    elif final:
        out.append({"kind": "no_seeds"})
    for s in stages:
        if s.best_from:
            out.append({"kind": "kept", "stage": s.stage, "node": s.best, "from": s.best_from})
    same = [s for s in stages if s.best and s.code == "same" and not s.best_from]
    if same:
        out.append(
            {
                "kind": "unchanged",
                "stages": [s.stage for s in same],
                "draft": [s.best_parent is None for s in same],
            }
        )
    failed = sum(s.counts.buggy for s in stages)
    if failed:
        out.append({"kind": "failed", "n": failed, "total": sum(s.counts.nodes for s in stages)})
    datasets = {str(m.get("dataset")) for s in stages for m in s.best_metrics if m.get("dataset")}
    if len(datasets) == 1:
        out.append({"kind": "one_dataset", "dataset": next(iter(datasets))})
    if not figures:
        out.append({"kind": "no_figures"})
    out.append({"kind": "no_literature"})
    return out


# ------------------------------------------------------------------ the paper --


def fmt_value(value: Any) -> str:
    """A metric value as the paper prints it (4 significant digits)."""
    return f"{value:.4g}" if isinstance(value, (int, float)) else "--"


def fmt_stderr(value: Any) -> str:
    """A standard error as the paper prints it (2 significant digits)."""
    return f"{value:.2g}" if isinstance(value, (int, float)) else "--"


def _esc(text: Any) -> str:
    return latex.latex_text(str(text or ""))


def _tt(text: Any) -> str:
    return "\\texttt{" + latex.latex_text(str(text or "")).replace("\n", " ") + "}"


def _render(part: str, **values: Any) -> str:
    return latex.render_tex(
        "facts_sections.tex.j2", part=part, esc=_esc, tt=_tt, num=fmt_value, se=fmt_stderr, **values
    ).strip()


FACTS_SECTIONS = (
    ("introduction", "Idea"),
    ("related_work", "Related Work"),
    ("method", "Method"),
    ("experiments", "Experiments"),
    ("results", "Results"),
    ("limitations", "Limitations"),
)


def facts_tex(
    run_dir: Path, cfg: Config, figures: list[dict[str, Any]], *, quote_plans: bool, code_model: str
) -> str:
    """The paper's ``.tex``: the run's facts through ``facts_sections.tex.j2`` into the template."""
    stages = stage_facts(run_dir, quote_plans=quote_plans)
    idea = idea_parts(run_dir)
    final = next((s for s in reversed(stages) if s.best), None)
    values: dict[str, Any] = {
        "idea": idea,
        "stages": stages,
        "final": final,
        "figures": figures,
        "cfg": cfg,
        "code_model": code_model,
        "seed_statistic": SEED_STATISTIC,
        "limits": limitations(stages, figures),
        "max_rows": MAX_ROWS,
    }
    sections = [
        {"name": name, "title": title, "text": _render(name, **values)} for name, title in FACTS_SECTIONS
    ]
    figs = [{**f, "caption": _esc(f["caption"])} for f in figures]
    return latex.render_tex(
        f"{cfg.report.template}.tex.j2",
        title=_esc(idea["title"]),
        abstract=_render("abstract", **values),
        sections=sections,
        figures=figs,
        has_bib=False,
        page_limit=cfg.report.page_limit,
    )


def _facts_captions(run_dir: Path, figures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The standard figures keep the pipeline's captions (drawn from the data they state); a model's
    figure gets a caption saying what drew it from which nodes' data (its model caption may hold
    numbers nobody measured)."""
    paths = RunPaths(run_dir)
    if (read_json(paths.figures_json, default={}) or {}).get("source") == "standard":
        return figures
    manifest = read_json(paths.figures / "manifest.json", default={}) or {}
    ids = [str(n.get("node_id")) for n in manifest.get("nodes") or [] if isinstance(n, dict)]
    caption = _render("figure_caption", ids=ids)
    return [{**f, "caption": caption} for f in figures]


def write_facts_paper(
    run_dir: Path,
    cfg: Config,
    client: LLMClient | None = None,
    *,
    memory_digest: str = "",
    options: ReportOptions | None = None,
) -> dict[str, Any]:
    """Write and compile ``paper/paper.pdf`` from the run's records (no LLM call); returns (and
    saves) ``paper/writeup.json`` with ``"writer": "facts"``. StepSkipped without LaTeX, StepFailed
    when the PDF does not compile."""
    opts = options or ReportOptions()
    run_dir = Path(run_dir)
    paths = RunPaths(run_dir)
    paper_dir = paths.paper
    figures, duplicates = stage_paper_figures(run_dir, opts)
    figures = _facts_captions(run_dir, figures)
    local = backend_name(client) == "local"
    tex = facts_tex(run_dir, cfg, figures, quote_plans=not local, code_model=_code_model(run_dir, cfg))
    paths.paper_tex.write_text(tex, encoding="utf-8")
    for stale in ("paper.pdf", "paper.aux", "paper.fdb_latexmk", "paper.fls", "paper.bbl", "paper.blg"):
        (paper_dir / stale).unlink(missing_ok=True)
    (paper_dir / "references.bib").unlink(missing_ok=True)  # the facts paper cites nothing
    (paper_dir / WRITER_INPUTS).unlink(missing_ok=True)  # no model writer's inputs: no such source
    result = latex.compile_pdf(paper_dir, cfg.exec.timeout, opts.tool_path)
    limit = cfg.report.page_limit or 4
    summary = {
        "writer": "facts",
        "pdf": "paper/paper.pdf" if result.ok else None,
        "pages": result.pages,
        "main_pages": result.main_pages,
        "page_limit": cfg.report.page_limit,
        "template": cfg.report.template,
        "over_page_limit": bool(result.ok and (result.main_pages or result.pages or 0) > limit),
        "failed_builds": 0 if result.ok else 1,
        "problems": [] if result.ok else [result.log_excerpt],
        "chktex_warnings": result.chktex,
        "citations": "none: the facts writer cites no literature",
        "references": [],
        "figures": figures,
        "duplicate_figures": duplicates,
        "reflections": [],
        "model_text": "plans quoted" if not local else "none (the embedded model's text is left out)",
    }
    atomic_write_json(paths.writeup_json, summary)
    if not result.ok:
        raise StepFailed(f"paper/paper.tex (facts writer) did not compile: {result.log_excerpt[:1500]}")
    return summary
