"""``bench report DIR [DIR2]``: the table (Markdown and JSON) and the figure (PNG) of a bench directory.

Per task: the runs' graded scores (mean, sample standard deviation, standard error over the
seeds that produced one; ``scored`` says how many of the runs did), the same normalised (0 =
the baseline measured in that bench, 1 = the task's best known), and the runs' cost (LLM calls,
tokens, USD, wall time, nodes). With a second directory: both side by side, and the difference
B - A of the normalised means with its standard error sqrt(se_A^2 + se_B^2) (none with one seed).
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
from pathlib import Path
from typing import Any

from ..base.config import ConfigError
from ..base.fileio import atomic_write_json, atomic_write_text, read_json
from ..base.paths import RunPaths
from .results import run_row
from .task import Task, load_task, task_dir


def _spread(values: list[float]) -> dict[str, Any]:
    n = len(values)
    if not n:
        return {"n": 0, "mean": None, "sd": None, "se": None}
    sd = statistics.stdev(values) if n > 1 else None
    return {
        "n": n,
        "mean": statistics.fmean(values),
        "sd": sd,
        "se": sd / math.sqrt(n) if sd is not None else None,
    }


def collect(out: Path) -> dict[str, Any]:
    """Rows and per-task summaries of the bench directory ``out``, read from its runs."""
    manifest = read_json(out / "bench.json", default=None)
    if not isinstance(manifest, dict):
        raise ConfigError(
            f"{out}: not a bench directory (no bench.json); `ai-scientist bench run --out {out}` makes one"
        )
    tasks: dict[str, Task] = {
        name: load_task(task_dir(name, ref)) for name, ref in (manifest.get("tasks") or {}).items()
    }
    rows, summaries = [], []
    for name, task in tasks.items():
        baseline = read_json(out / "baselines" / f"{name}.json", default={}) or {}
        base = baseline.get("score")
        task_rows = []
        seeds = {
            int(m.group(1)): p
            for p in (out / "runs").glob(f"{name}-s*")
            if (m := re.fullmatch(rf"{name}-s(\d+)", p.name))
        }
        for seed, run_dir in sorted(seeds.items()):
            if RunPaths(run_dir).config.is_file():  # not a run killed before it recorded anything
                task_rows.append(run_row(task, seed, run_dir, base))
        rows += task_rows
        scores = [r["score"] for r in task_rows if r["score"] is not None]
        norms = [r["normalised"] for r in task_rows if r["normalised"] is not None]
        summaries.append(
            {
                "task": name,
                "title": task.spec.title,
                "metric": task.spec.metric.name,
                "direction": task.spec.metric.direction,
                "baseline": base,
                "baseline_error": baseline.get("error"),
                "best_known": task.spec.best_known.value,
                "best_known_published": task.spec.best_known.published,
                "best_known_source": task.spec.best_known.source,
                "runs": len(task_rows),
                "finished": sum(r["status"] == "completed" for r in task_rows),
                "scored": len(scores),
                "score": _spread(scores),
                "normalised": _spread(norms),
                **{k: sum(r[k] for r in task_rows) for k in ("nodes", "llm_calls", "prompt_tokens", "cached_tokens", "completion_tokens", "usd", "wall_s")},
            }
        )  # fmt: skip
    return {
        "dir": str(out),
        "label": manifest.get("label"),
        "commands": manifest.get("commands"),
        "tasks": summaries,
        "runs": rows,
    }


def _num(v: Any, fmt: str = ".4g") -> str:
    return "–" if v is None else format(v + 0.0 if isinstance(v, float) else v, fmt)  # + 0.0: no "-0.000"


def _pm(s: dict[str, Any], fmt: str = ".4g") -> str:
    if s["mean"] is None:
        return "–"
    return _num(s["mean"], fmt) + (f" ± {_num(s['sd'], '.2g')}" if s["sd"] is not None else "")


def markdown(data: dict[str, Any]) -> str:
    lines = [f"# Bench results: {data['dir']}", ""]
    if data.get("label"):
        lines += [f"**{data['label']}**", ""]
    for c in data.get("commands") or []:
        lines.append(f"    {shlex.join(c['argv'])}")
    lines += [
        "",
        "Score: the graded metric of the best node (mean ± sample s.d. over the seeds that scored);",
        "normalised: 0 = the baseline measured in this bench, 1 = the best known.",
        "",
        "| task | metric | baseline | best known | runs (scored) | score | normalised | nodes | LLM calls | tokens (cached) | USD | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in data["tasks"]:
        arrow = "↑" if t["direction"] == "maximize" else "↓"
        known = _num(t["best_known"]) + ("" if t["best_known_published"] else "*")
        lines.append(
            f"| {t['task']} | {t['metric']} {arrow} | {_num(t['baseline'])} | {known} | {t['runs']} ({t['scored']}) "
            f"| {_pm(t['score'])} | {_pm(t['normalised'], '.3f')} | {t['nodes']} | {t['llm_calls']} "
            f"| {t['prompt_tokens'] + t['completion_tokens']:,} ({t['cached_tokens']:,}) | {t['usd']:.4f} | {t['wall_s'] / 60:.1f} min |"
        )
    lines += ["", "\\* not published: the task author's reference (see `bench list`).", "", "## Runs", ""]
    lines += [
        "| task | seed | status | exit | best node | score | normalised | nodes (good) | LLM calls | prompt tok (cached) | completion tok | USD | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["runs"]:
        lines.append(
            f"| {r['task']} | {r['seed']} | {r['status']} | {_num(r['exit_code'], '')} | {r['best_node'] or '–'} "
            f"| {_num(r['score'])} | {_num(r['normalised'], '.3f')} | {r['nodes']} ({r['good']}) | {r['llm_calls']} "
            f"| {r['prompt_tokens']:,} ({r['cached_tokens']:,}) | {r['completion_tokens']:,} | {r['usd']:.4f} | {r['wall_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per task in both: A's and B's normalised spread and B - A with its standard error."""
    by_b = {t["task"]: t for t in b["tasks"]}
    out = []
    for ta in a["tasks"]:
        tb = by_b.get(ta["task"])
        if tb is None:
            continue
        na, nb = ta["normalised"], tb["normalised"]
        diff = nb["mean"] - na["mean"] if na["mean"] is not None and nb["mean"] is not None else None
        se = math.hypot(na["se"], nb["se"]) if na["se"] is not None and nb["se"] is not None else None
        out.append(
            {
                "task": ta["task"],
                "a": na,
                "b": nb,
                "a_score": ta["score"],
                "b_score": tb["score"],
                "difference": diff,
                "difference_se": se,
            }
        )
    return {"a": a["dir"], "b": b["dir"], "a_label": a.get("label"), "b_label": b.get("label"), "tasks": out}


def compare_markdown(c: dict[str, Any]) -> str:
    lines = [
        "# Bench comparison",
        "",
        f"A: {c['a']}" + (f" ({c['a_label']})" if c["a_label"] else ""),
        f"B: {c['b']}" + (f" ({c['b_label']})" if c["b_label"] else ""),
        "",
        "Normalised scores (0 = baseline, 1 = best known), mean ± s.d. over seeds; B − A ± its standard error.",
        "",
        "| task | A score | B score | A normalised | B normalised | B − A | ± s.e. |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in c["tasks"]:
        lines.append(
            f"| {t['task']} | {_pm(t['a_score'])} | {_pm(t['b_score'])} | {_pm(t['a'], '.3f')} | {_pm(t['b'], '.3f')} "
            f"| {_num(t['difference'], '+.3f')} | {_num(t['difference_se'], '.3f')} |"
        )
    return "\n".join(lines) + "\n"


def figure(datasets: list[dict[str, Any]], path: Path) -> Path:
    """Normalised score per task: each seed a dot, the mean with its standard error, against the
    baseline (0) and the best known (1); one colour per bench directory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [t["task"] for t in datasets[0]["tasks"]]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(names) + 2), 3.8))
    width = 0.6 / len(datasets)
    for k, data in enumerate(datasets):
        label = data.get("label") or Path(data["dir"]).name
        by_task = {t["task"]: t for t in data["tasks"]}
        for i, name in enumerate(names):
            x = i - 0.3 + width * (k + 0.5)
            pts = [r["normalised"] for r in data["runs"] if r["task"] == name and r["normalised"] is not None]
            ax.scatter([x] * len(pts), pts, s=14, color=f"C{k}", alpha=0.6, label=label if i == 0 else None)
            s = by_task.get(name, {}).get("normalised") or {}
            if s.get("mean") is not None:
                ax.errorbar(
                    [x], [s["mean"]], yerr=[s["se"] or 0.0], fmt="_", markersize=14, color=f"C{k}", capsize=3
                )
    ax.axhline(0.0, color="grey", lw=1, ls="--")
    ax.axhline(1.0, color="black", lw=1, ls=":")
    ax.text(len(names) - 0.5, 0.0, " baseline", va="bottom", ha="right", fontsize=7, color="grey")
    ax.text(len(names) - 0.5, 1.0, " best known", va="bottom", ha="right", fontsize=7)
    # how many runs scored, per directory: a run with no working node has no dot
    scored = [
        " / ".join(f"{t['scored']}/{t['runs']}" for d in datasets for t in d["tasks"] if t["task"] == name)
        for name in names
    ]
    ax.set_xticks(
        range(len(names)), [f"{n}\n{s} scored" for n, s in zip(names, scored, strict=True)], fontsize=8
    )
    ax.set_ylabel("normalised score")
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(out: Path, other: Path | None = None) -> dict[str, Path]:
    """Write ``results.{json,md,png}`` into ``out`` (with ``other``: ``compare.{json,md,png}`` too)."""
    data = collect(out)
    paths = {"json": out / "results.json", "md": out / "results.md", "png": out / "results.png"}
    atomic_write_json(paths["json"], data)
    atomic_write_text(paths["md"], markdown(data))
    figure([data], paths["png"])
    if other is not None:
        data_b = collect(other)
        c = compare(data, data_b)
        paths.update(
            {
                "compare_json": out / "compare.json",
                "compare_md": out / "compare.md",
                "compare_png": out / "compare.png",
            }
        )
        atomic_write_json(paths["compare_json"], c)
        atomic_write_text(paths["compare_md"], compare_markdown(c))
        figure([data, data_b], paths["compare_png"])
    return paths
