"""Plot aggregation: one LLM-written script, run in the sandbox, figures checked.

The model (role ``plotting``) sees the data manifest (files, shapes, dtypes,
metrics, producing node and seed) and returns ``{script, figures: [{file,
caption}]}``. The script runs in the sandbox with the run's ``exec`` limits,
with ``figures/`` as its workspace (the data it may read is copied there).
Every declared figure is checked (exists, opens, not blank); the precise
failures go back to the model for up to ``report.plot_reflection_rounds``
more rounds. At most ``report.max_figures`` good figures are kept, listed in
``figures/figures.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.fileio import atomic_write_json, atomic_write_text, read_json
from ..base.images import SAFE_FIGURE_NAME as _SAFE_NAME
from ..base.images import plot_schema
from ..base.paths import RunPaths, claim_numbered
from ..execution.base import Executor, Limits, SandboxError
from ..llm.call import CallContext, StructuredOutputError
from ..llm.prompting import Prompter, ask
from ..treesearch.tried import sentences
from . import prompts
from .errors import StepFailed, StepSkipped
from .facts import idea_parts
from .images import check_figure
from .manifest import build_manifest, for_prompt
from .runread import load_run

if TYPE_CHECKING:
    from ..base.config import Config
    from ..llm.client import LLMClient

SCRIPT_NAME = "aggregate_plots.py"
STANDARD_SCRIPT = "standard_plots.py"  # the pipeline's own figures (reporting/standard_plots.py)


def _tail(text: str, n: int = 3000) -> str:
    text = text or ""
    return text if len(text) <= n else "[...]\n" + text[-n:]


def run_script(
    executor: Executor,
    python: str,
    fig_dir: Path,
    script: str,
    limits: Limits | None = None,
    name: str = SCRIPT_NAME,
) -> tuple[bool, str]:
    """Write and run the script in the sandbox; (ok, failure description)."""
    return _run_script(executor, python, fig_dir, script, limits, name)[:2]


def _run_script(
    executor: Executor, python: str, fig_dir: Path, script: str, limits: Limits | None, name: str
) -> tuple[bool, str, str]:
    """(ok, failure description, stdout) of ``script`` run as ``name`` in the sandbox."""
    for stale in fig_dir.glob("*.png"):  # a figure left by an earlier round must not pass as new
        stale.unlink()
    atomic_write_text(fig_dir / name, script)
    try:
        result = executor.run([python, name], workspace=fig_dir, limits=limits)
    except SandboxError as exc:  # a broken sandbox is not the script's fault: no reflection helps
        raise StepFailed(f"the sandbox could not run {name} in {fig_dir}: {exc}") from exc
    # kept for inspection (like nodes/<id>/exec/): what the script printed in each round
    _, path = claim_numbered(fig_dir / "exec", "aggregate")
    record = result.to_dict() if hasattr(result, "to_dict") else {"exit_code": result.exit_code}
    atomic_write_json(path, record)
    if getattr(result, "ok", result.exit_code == 0):
        return True, "", result.stdout
    why = getattr(result, "reason", "") or ""
    killed = getattr(result, "killed_by", None)
    head = f"the script failed (exit code {result.exit_code}"
    head += f", killed by {killed}" if killed else ""
    head += f": {why})" if why else ")"
    return (
        False,
        f"{head}\nstderr (tail):\n{_tail(result.stderr)}\nstdout (tail):\n{_tail(result.stdout, 1000)}",
        result.stdout,
    )


def standard_figures(
    executor: Executor, python: str, fig_dir: Path, limits: Limits | None = None
) -> tuple[list[dict], list[dict], str]:
    """The pipeline's own figures of the run (``standard_plots.py``: the best metric per stage, the
    last best node's saved series), drawn in the sandbox from ``manifest.json``; (good, rejected,
    problem). Used when no LLM-written figure survived (``report.standard_figures``)."""
    script = Path(__file__).with_name("standard_plots.py").read_text(encoding="utf-8")
    ok, problem, stdout = _run_script(executor, python, fig_dir, script, limits, STANDARD_SCRIPT)
    declared: list[dict] = []
    for line in reversed(stdout.strip().splitlines()):
        try:
            declared = list(json.loads(line).get("figures") or [])
            break
        except (ValueError, AttributeError):
            continue
    good, rejected = check_declared(fig_dir, declared)
    return good, rejected, problem if not ok else ""


def check_declared(fig_dir: Path, figures: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Split declared figures into (good, rejected-with-reason)."""
    good: list[dict] = []
    rejected: list[dict] = []
    seen: set[str] = set()
    for fig in figures:
        name = str(fig.get("file", ""))
        if not _SAFE_NAME.match(name):
            rejected.append({"file": name, "reason": f"{name!r}: file must be a plain name like fig_1.png"})
            continue
        if name in seen:
            rejected.append({"file": name, "reason": f"{name}: declared twice"})
            continue
        seen.add(name)
        reason = check_figure(fig_dir / name)
        if reason:
            rejected.append({"file": name, "reason": reason})
        else:
            good.append({"file": name, "caption": str(fig.get("caption", "")).strip()})
    return good, rejected


# of each stage's "worked" and "failed", for the aggregation call: whole (the summary's schema
# bounds them at 1,000 and 800), cut only past that and then at a sentence, marked (relay s8 mm2 037:
# cut at 600 they ended mid-metric)
FINDINGS_CHARS = 1_200


def stage_findings(run_dir: Path) -> list[dict[str, Any]]:
    """What each stage's end summary says worked and failed (``stage_summaries/stage<N>.json``),
    whole up to :data:`FINDINGS_CHARS` each: which comparisons the figures should show. A relay run's
    plotter had twelve nodes' hundred metrics and had to guess which mattered."""
    paths = RunPaths(run_dir)
    out = []
    for file in sorted(paths.stage_summaries.glob("stage*.json")) if paths.stage_summaries.is_dir() else []:
        data = read_json(file, default=None)
        summary = data.get("summary") if isinstance(data, dict) else None
        if not isinstance(summary, dict) or not isinstance(data.get("stage"), int):
            continue
        parts = {
            k: sentences(str(summary[k]), FINDINGS_CHARS) for k in ("worked", "failed") if summary.get(k)
        }
        if parts:
            out.append({"stage": data["stage"], **parts})
    return sorted(out, key=lambda f: f["stage"])


def aggregate_plots(run_dir: Path, cfg: Config, client: LLMClient, executor: Executor) -> dict[str, Any]:
    """Produce the run's figures; returns the content written to ``figures/figures.json``.

    Raises StepSkipped when the run has no good node with data or metrics, and
    StepFailed when no figure survived all rounds.
    """
    fig_dir = RunPaths(run_dir).figures
    fig_dir.mkdir(parents=True, exist_ok=True)
    manifest = build_manifest(load_run(run_dir), fig_dir, cfg.agent.seed)
    atomic_write_json(fig_dir / "manifest.json", manifest)
    if not any(e["files"] or e["metrics"] for e in manifest["nodes"]):
        raise StepSkipped("no good node with saved data or metrics: nothing to plot")
    rcfg = cfg.report
    good: list[dict[str, Any]]
    rejected: list[dict[str, Any]]
    feedback, script, good, rejected = "", "", [], []
    rounds = rcfg.plot_reflection_rounds + 1
    prompter = Prompter(cfg, client)  # the run's one prompt path: budget, counter, ledger
    for rnd in range(rounds):
        values = {
            "manifest": for_prompt(manifest, fig_dir),
            "max_figures": rcfg.max_figures,
            "instructions": prompts.render(
                "plotting_user.j2", findings=stage_findings(run_dir), idea=idea_parts(run_dir)
            ),
            # a retry's problems and script: last in the prompt (the rest is the first round's prefix)
            "node_brief": prompts.render("plotting_retry.j2", feedback=feedback, previous_script=script)
            if feedback
            else "",
        }
        ctx = CallContext(node_id="run", phase="plots", label=f"aggregate_r{rnd}")
        try:
            plan = ask(
                client,
                prompter,
                "plot_aggregate",
                values,
                role="plotting",
                ctx=ctx,
                schema=plot_schema(rcfg.max_figures),
            ).parsed
        except StructuredOutputError as e:
            # an answer still unusable after its repair round (the embedded model's cut at
            # max_tokens, session 8's main job) is a failed round, not a failed report: the next
            # round, then the pipeline's standard figures (the main job's paper had none)
            good, rejected, feedback = [], [], f"- the plotting answer was unusable: {e}"
            continue
        script = str(plan.get("script", ""))
        ok, run_error = run_script(executor, cfg.exec.python, fig_dir, script, Limits.from_config(cfg.exec))
        good, rejected = check_declared(fig_dir, list(plan.get("figures") or []))
        problems = ([run_error] if not ok else []) + [r["reason"] for r in rejected]
        if not good and not problems:
            problems = ["the answer declared no figures"]
        if len(good) > rcfg.max_figures:
            problems.append(f"{len(good)} figures declared; at most {rcfg.max_figures} are kept")
        if not problems:
            break
        feedback = "\n".join(f"- {p}" for p in problems)
    kept, dropped = good[: rcfg.max_figures], good[rcfg.max_figures :]
    rejected += [{"file": f["file"], "reason": "over report.max_figures"} for f in dropped]
    result = {"figures": kept, "rejected": rejected, "rounds_used": rnd + 1, "script": SCRIPT_NAME}
    if not kept and rcfg.standard_figures:  # the model's figures all failed: the pipeline's own
        std, std_rejected, problem = standard_figures(
            executor, cfg.exec.python, fig_dir, Limits.from_config(cfg.exec)
        )
        kept = std[: rcfg.max_figures]
        result = {
            **result,
            "figures": kept,
            "rejected": rejected + std_rejected,
            "script": STANDARD_SCRIPT,
            "source": "standard",
            "llm_problems": feedback,
        }
        if problem:
            feedback += f"\n- the standard figures failed too: {problem}"
    atomic_write_json(RunPaths(run_dir).figures_json, result)
    if not kept:
        raise StepFailed(f"no usable figure after {rounds} round(s); last problems:\n{feedback}")
    return result
