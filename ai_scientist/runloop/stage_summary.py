"""Stage summaries: at each stage's end the ``summary`` role says what the stage tried, what
worked and what failed; the next stages' prompts (layer ``stage_summary``) and the writeup read it.

One summary per finished stage, in ``stage_summaries/stage<N>.json``::

    {"stage": 2, "name": "baseline_tuning", "title": "Baseline tuning",
     "best_node": "n0007", "best_metric": {...} | null, "seeds": {...} | null,
     "nodes": 4, "good": 3, "buggy": 1, "running": 0, "seed_runs": 2, "seed_good": 2,
     "summary": {"tried": ..., "worked": ..., "failed": ..., "next": ...} | null,
     "error": null | "why the call failed"}

The best node (the stage end's choice), its metric and the counts come from the journal, counted
as :func:`ai_scientist.treesearch.best.count_nodes` defines them (search nodes; seed re-runs apart); only the four prose fields come
from the model (a JSON schema bounds each). What the model is shown of the stage is
:func:`.stage_facts.stage_facts`: numbers as text at 4 significant digits, table cells cut at a word or a
sentence, never mid-word. The call is a run-level call (``nodes/run/``
prompt logs, phase ``summary``, label ``stage<N>``), so ``replay`` answers it from the recording.
A stored file is never written again: a resumed run that finishes the same stage again reads it
instead of asking (the checkpoint rule of the node phases).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.artifacts import Critique, RunRecord, read_artifact
from ..base.fileio import atomic_write_json, read_json
from ..base.paths import RUN_FILE, VLM_FILE, RunPaths
from ..base.templates import render
from ..llm.call import LLMError
from ..treesearch.best import count_nodes
from ..treesearch.seeds import num, seed_plan
from ..treesearch.stages import STAGES
from .stage_facts import SEARCH_RUN_APART, band_text, figure_finding, rerank_tie, rough_note, stage_facts

if TYPE_CHECKING:
    from ..base.run import Run
    from ..treesearch.journal import JournalView
    from ..treesearch.node import Node
    from .services import Services

FIELDS = (("tried", "Tried"), ("worked", "Worked"), ("failed", "Failed"), ("next", "For the next stage"))


def write_stage_summary(
    run: Run,
    services: Services,
    view: JournalView,
    stage: int,
    best_id: str | None,
    seeds: dict | None,
    rerank: dict | None = None,
) -> dict[str, Any]:
    """The stored summary of ``stage``, asking the ``summary`` role once if there is none yet.
    ``rerank``: the stage end's re-ranking over seeds (the ``seed_rerank`` event's record), kept
    in the file and shown in the facts."""
    path = RunPaths(run.dir).stage_summary(stage)
    stored = read_json(path)
    if stored is not None:
        return stored
    from ..phases.schemas import STAGE_SUMMARY_SCHEMA

    best = view.get(best_id) if best_id else None
    nodes = [view.get(i) for i in view.ids("search", stage)]
    counts = count_nodes(view.get(i) for i in view.ids("all", stage))
    record: dict[str, Any] = {
        "stage": stage,
        "name": STAGES[stage].name,
        "title": STAGES[stage].title,
        "best_node": best_id,
        "best_metric": best.metric.to_dict() if best is not None and best.metric else None,
        "seeds": (seeds or {}).get("aggregate"),
        **counts.to_dict(),
        "seed_rerank": rerank,
        "summary": None,
        "error": None,
    }
    if not nodes:  # a stage that ran no search node (cap 0, or nothing left to try): no call
        record["note"] = "no search node ran in this stage: nothing to summarise, no summary call"
        atomic_write_json(path, record)
        run.event("stage_summary", stage=stage, path=str(path.relative_to(run.dir)), ok=True, skipped=True)
        return record
    earlier = summaries_text(run.dir, before=stage)
    facts = stage_facts(
        view,
        stage,
        best,
        seeds,
        rerank,
        figures=_figures(run.dir, nodes),
        seed_info=(
            run.cfg.agent.seed,
            seed_plan(run.cfg.agent.seed, run.cfg.agent.multi_seed_eval.num_seeds),
            SEARCH_RUN_APART not in earlier,  # the reason once a prompt: the earlier stages gave it
        ),
    )
    load = load_text(run.dir, view, stage, run.idea.to_markdown())
    if load and facts:  # in the header, which the layer's policy keeps, before the node table's head
        lines = facts[0].split("\n")
        at = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
        # and before the line that heads the table ("Ablations, each measured against ...:"): the
        # load block between them left a stage-4 summary's heading with nothing under it (relay
        # s8 mm2 036)
        if at and at < len(lines) and lines[at - 1].endswith(":"):
            at -= 1
        facts = ["\n".join([*lines[:at], load, *lines[at:]]), *facts[1:]]
    values = {
        "stage_number": stage,
        "stage_title": STAGES[stage].title,
        "stage_facts": facts,
        "stage_summary": earlier,
    }
    try:
        res = services.ask_run(
            "stage_summary",
            values,
            phase="summary",
            label=f"stage{stage}",
            role="summary",
            schema=STAGE_SUMMARY_SCHEMA,
            stage=stage,
        )
        record["summary"] = {k: str(res.parsed.get(k, "")) for k, _ in FIELDS}
    except LLMError as exc:  # the run goes on; the next stages see the journal's facts only
        record["error"] = str(exc)[:500]
        run.event("stage_summary_failed", stage=stage, reason=record["error"])
    atomic_write_json(path, record)
    run.event("stage_summary", stage=stage, path=str(path.relative_to(run.dir)), ok=record["error"] is None)
    return record


def load_summaries(run_dir: Path, before: int | None = None) -> list[dict[str, Any]]:
    """The stored summaries (of the stages before ``before``), in stage order."""
    paths = RunPaths(run_dir)
    out = []
    for stage in sorted(STAGES):
        if before is not None and stage >= before:
            break
        data = read_json(paths.stage_summary(stage))
        if isinstance(data, dict):
            out.append(data)
    return out


# a noise figure a summary quotes: "sigma 13.88", "seed sigma = 0.02", "noise band 39.25", "a band
# of 25.25", "threshold 0.07" (a number right after the word, "of", "=" or ":"), or "the 39.25
# noise band" (the number first)
_NUMBER = r"\d+(?:\.\d+)?(?:e-?\d+)?(?!\d|\.\d)"
_NOISE_FIGURE = re.compile(
    rf"\b(?:sigma|σ|(?:noise )?band|threshold)\s*(?:of|=|:|was|is)?\s*±?{_NUMBER}"
    rf"|\b{_NUMBER}(?=\s+(?:seed[- ])?noise band\b)",
    re.I,
)


def label_noise_figures(text: str, stage: Any) -> str:
    """``text`` with each seed-noise figure it quotes labelled ``(stage N's estimate)``: the
    estimate changes as re-runs accumulate, and a relay run's code prompt showed an earlier
    stage's "sigma 13.88 ... 39.25 noise band" beside the protocol's current "sigma 9.93 ... 28.1"
    with nothing to tell them apart (issue 28: one current figure per prompt)."""
    label = f" (stage {stage}'s estimate)"
    return _NOISE_FIGURE.sub(lambda m: m.group(0) + label, text)


def render_summary(data: dict[str, Any], why: bool = True) -> str:
    """One stage's summary as prompt text: headline from the journal, then the model's fields.
    ``why``: a heading that gives a seed mean says why the search run is left out of it (once per
    prompt: :func:`summaries_text` asks it of the first such heading only)."""
    best = data.get("best_node")
    metric = data.get("best_metric")
    shown = f"{metric['name']}={metric['value']:.6g}" if metric else "no metric"
    head = f"### Stage {data.get('stage')} ({data.get('title')}): {data.get('nodes')} nodes, {data.get('good')} good"
    if data.get("incomparable"):
        head += f", {data['incomparable']} not comparable (changed the evaluation protocol)"
    if data.get("seed_runs"):  # re-measurements of the best, never counted as nodes
        head += f" (+{data['seed_runs']} seed re-runs of the best)"
    rerank = data.get("seed_rerank") or {}
    tie = rerank_tie(rerank) if best else None
    if tie is not None:  # a winner inside the noise band is no "best": a tie, said with the band
        level = ", ".join(f"{o['node_id']}'s {num(o['mean'])}" for o in tie["level"])
        head += (
            f"; kept {best} ({shown}), a tie within the seed noise{rough_note(rerank)}: its mean {num(tie['mean'])} vs "
            f"{level} ({band_text(tie)}"
            + (f"; means over the seed re-runs, {SEARCH_RUN_APART})" if why else ")")
        )
    else:
        head += f"; best {best} ({shown})" if best else "; no node handed over"
    if rerank.get("changed"):
        head += f", chosen over {rerank['node_id']} by its mean over seed re-runs" + (
            "" if tie is not None or not why else f" ({SEARCH_RUN_APART})"
        )
    body = data.get("summary") or {}
    stage = data.get("stage")
    lines = [head, *(f"{title}: {label_noise_figures(body[k], stage)}" for k, title in FIELDS if body.get(k))]
    if not body:
        lines.append(f"(no summary: {data.get('error') or data.get('note') or 'not written'})")
    return "\n".join(lines)


def summaries_text(run_dir: Path, before: int) -> str:
    """The ``stage_summary`` layer's value for a prompt of stage ``before``: '' in stage 1."""
    out: list[str] = []
    for s in load_summaries(run_dir, before=before):
        said = any(SEARCH_RUN_APART in text for text in out)  # the reason once, where a mean first is
        out.append(render_summary(s, why=not said))
    return "\n\n".join(out)


def load_text(run_dir: Path, view: JournalView, stage: int, idea_text: str = "") -> str:
    """The machine's load during each of the stage's nodes' run commands, seed re-runs included
    (:func:`..phases.evidence.load_summary`), one line a node, for a stage whose metrics time
    something (a benchmark kind): its timings compare only under like loads (relay s7 mm2 019's
    summary ranked runs taken under load 6 on 2 cores with idle ones). "" otherwise, or when no
    command recorded a load."""
    from ..context.kinds import experiment_kinds
    from ..phases.evidence import load_summary

    nodes = [view.get(i) for i in view.ids("all", stage)]
    names = [m.name for n in nodes for m in n.metrics]
    if "benchmark" not in experiment_kinds(names, idea_text):
        return ""
    paths = RunPaths(run_dir)
    rows = []
    for n in nodes:
        record = read_artifact(paths.node(n.id).file(RUN_FILE), RunRecord)
        load = load_summary(record.outputs) if record is not None else None
        if load is not None:
            rows.append({"node_id": n.id, "seed_of": n.parent_id if n.is_seed_eval else None, **load})
    if not rows:
        return ""
    return render("phases/stage_summary_load.j2", rows=rows).strip()


def _figures(run_dir: Path, nodes: list[Node]) -> dict[str, str]:
    """Node id -> what its figure review found (``vlm.json``), for the nodes that have one."""
    paths = RunPaths(run_dir)
    out = {}
    for n in nodes:
        critique = read_artifact(paths.node(n.id).file(VLM_FILE), Critique)
        verdict = critique.verdict if critique is not None else None
        found = figure_finding(verdict.to_json() if verdict is not None else None)
        if found:
            out[n.id] = found
    return out
