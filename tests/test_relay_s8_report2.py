"""Issue 28, relay run s8 ln2 (report side, second pass): what the aggregation call, the paper's
figure reviews and the writer's reflection rounds are told. Every expectation is read from what a
scripted report really sent (its prompt logs) and the files the run wrote (the idea, the nodes'
metrics.json, the aggregation script, the figure reviews' cache)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from components import needs_latex
from test_report_support import _plot_png, default_responder, report_cfg, role_of

from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend

LIBRARY = Path(__file__).resolve().parents[1] / "examples" / "label_noise" / "references.bib"


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    logs = sorted(set((run / "nodes").glob("*/prompt_logs/*.json")) - before)
    return [json.loads(p.read_text()) for p in logs]


def _logs(run: Path) -> set[Path]:
    return set((run / "nodes").glob("*/prompt_logs/*.json"))


def _aggregate(run: Path, tmp_path: Path) -> list[dict[str, Any]]:
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots

    answer = default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    return _records(run, before)


def test_the_aggregation_call_names_the_idea_and_the_metrics_files_layout(tmp_path: Path, run_copy):
    # relay s8 ln2 033: the plotter got neither the research idea (every other call has it) nor the
    # layout of a node's metrics.json ("holds: this entry's metrics"), so it could guess a
    # name -> value object and plot nothing; both are said now, from the run's own files
    run = run_copy(tmp_path)
    rec = next(r for r in _aggregate(run, tmp_path) if r["label"].startswith("aggregate"))
    user = _text(rec["messages"][-1])
    flat = " ".join(user.split())
    # the idea as the run holds it: its title and hypothesis, and what it compares (its experiments)
    idea = (RunPaths(run).idea_md).read_text()
    title = next(x[2:].strip() for x in idea.splitlines() if x.startswith("# "))
    sections = {
        h.split("\n", 1)[0].strip(): " ".join(h.split("\n", 1)[1].split()) for h in idea.split("\n## ")[1:]
    }
    assert f"The research idea the figures are evidence for: {title}" in user, user[-3000:]
    assert f"Hypothesis: {sections['Hypothesis']}" in flat
    assert f"What it compares: {sections['Experiments']}" in flat
    # the layout of a metrics.json the manifest lists, as the node's program really wrote it
    saved = json.loads((RunPaths(run).figures / "manifest.json").read_text())
    path = next(f["path"] for e in saved["nodes"] for f in e["files"] if f["path"].endswith("/metrics.json"))
    data = json.loads((RunPaths(run).figures / path).read_text())
    assert isinstance(data, dict) and list(data) == ["metrics"] and isinstance(data["metrics"], list)
    line = next(x for x in user.splitlines() if x.startswith("A node's metrics.json is"))
    assert '{"metrics": [{' in line and "a list of records" in line, line
    for key in data["metrics"][0]:
        assert f'"{key}":' in line, (key, line)
    # said once, in the manifest's header (before its block), not in the instructions
    assert user.count("A node's metrics.json is") == 1
    assert user.index("A node's metrics.json is") < user.index('{"nodes": [')
    # the stage summaries one a line (ln2 033: "...(0.909, 0.9105).- Stage 2: worked:")
    stages = [x for x in user.splitlines() if x.startswith("- Stage ")]
    assert stages and all(x.count("- Stage ") == 1 for x in stages), stages


def _review(run: Path, tmp_path: Path, file: str, caption: str, respond: Any = None) -> dict[str, Any]:
    """One paper figure review of ``figures/<file>`` with ``caption``; its prompt-log record."""
    from ai_scientist.reporting.vlm import review_figures

    answer = respond or default_responder()
    cfg = report_cfg(tmp_path)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(run, cfg, llm, [{"file": file, "caption": caption}], phase="review")
    (rec,) = _records(run, before)
    assert rec["label"].startswith("figure_"), rec["label"]
    return rec


def test_a_second_figure_review_after_a_caption_revision_says_only_the_caption_can_change(
    tmp_path: Path, run_copy
):
    # relay s8 ln2 046: the re-check of a figure whose caption the writer revised did not say the
    # image was unchanged and final, so the reviewer's suggestions about the plot's title went
    # nowhere; it says so now, and what can still change (the caption)
    from ai_scientist.reporting.vlm import REVIEWS_CACHE

    run = run_copy(tmp_path)
    fig_dir = RunPaths(run).figures
    _plot_png(fig_dir / "fig_a.png", seed=5)
    first = _review(run, tmp_path, "fig_a.png", "Validation accuracy per configuration.")
    assert "Reviewed before" not in _text(first["messages"][-1])
    cache = json.loads((fig_dir / REVIEWS_CACHE).read_text())
    earlier = cache["last|fig_a.png"]
    second = _review(run, tmp_path, "fig_a.png", "Clean validation accuracy per configuration (seed 0).")
    user = _text(second["messages"][-1])
    cache = json.loads((fig_dir / REVIEWS_CACHE).read_text())
    now = cache["last|fig_a.png"]
    assert now["key"].split("|")[0] == earlier["key"].split("|")[0]  # the same image bytes
    assert now["caption"] != earlier["caption"]
    line = next(x for x in user.splitlines() if x.startswith("Reviewed before: "))  # a line of its own
    assert "the image is the same file, unchanged; only its caption was revised" in line, line
    assert f'(it was: "{earlier["caption"]}")' in line
    assert f"That review scored it {earlier['review']['score']}" in line
    block = user[user.index(line) :].splitlines()  # the earlier issues follow, one a line (s10 ln 046)
    for issue in earlier["review"]["issues"]:
        assert f"- {issue}" in block, issue
    rest = next(x for x in block if x.startswith("The image is not redrawn at this point"))
    assert "only the caption can still change" in rest
    # a redrawn image (new bytes): its review says so and does not call the image final
    _plot_png(fig_dir / "fig_a.png", seed=11)
    third = _review(run, tmp_path, "fig_a.png", "Clean validation accuracy per configuration (seed 0).")
    line = next(x for x in _text(third["messages"][-1]).splitlines() if x.startswith("Reviewed before: "))
    assert line.startswith("Reviewed before: the image was redrawn since"), line
    assert "only the caption can still change" not in line


def test_a_final_figure_review_shows_the_metrics_the_figure_uses_and_counts_the_rest(
    tmp_path: Path, run_copy
):
    # relay s8 ln2 034-039: each final figure review carried every metric of every node its caption
    # named and of all their re-runs (5-9k characters) for a figure of a handful; now the headline,
    # the metrics the caption names or states a value of, and those the figure's part of the
    # aggregation script reads, the rest counted. The script is the pipeline's: written by the
    # aggregation step from the plotter's answer, reading the nodes' metrics.json files.
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots
    from ai_scientist.reporting.runread import load_run

    run = run_copy(tmp_path)
    fig_dir = RunPaths(run).figures
    view = load_run(run)
    nid = next(i for i, n in view.nodes.items() if n.get("status") == "good" and view.seed_runs(i))
    runs = [nid] + [str(r["id"]) for r in view.seed_runs(nid)]
    # a relay-like node: a grid, a diagnostic and a gain beside the headline, different in each run
    extra = [f"val_accuracy_l2_{l2}" for l2 in ("0.0", "0.01", "0.1")]
    extra += ["train_accuracy", "flipped_fit_rate", "l2_gain_over_no_l2"]
    for k, rid in enumerate(runs):
        # the program's file (the manifest copies it) and the node's (what the run's view reads)
        written = RunPaths(run).node(rid).root / "workspace" / "metrics.json"
        data = json.loads(written.read_text())
        for j, name in enumerate(extra):
            value = round(0.61 + 0.0317 * j + 0.0041 * k, 4)
            data["metrics"].append(
                {"name": name, "value": value, "direction": "maximize", "dataset": "synthetic"}
            )
        for path in (written, RunPaths(run).node(rid).metrics):
            path.write_text(json.dumps(data))

    chosen_path: list[str] = []

    def plotter(messages, schema, ctx, role):
        if role != "plotting":
            return default_responder()(messages, schema, ctx, role)
        manifest = json.loads((fig_dir / "manifest.json").read_text())  # written before the call
        entry = next(e for e in manifest["nodes"] if e["node_id"] == nid)
        path = next(f["path"] for f in entry["files"] if f["path"].endswith("/metrics.json"))
        chosen_path[:] = [path]
        script = (
            "import json\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "SHOWN = 'flipped_fit_rate'  # a constant the figure's block uses\n"
            "def load():\n"
            f"    return {{m['name']: m['value'] for m in json.load(open('{path}'))['metrics']}}\n"
            "try:\n"
            "    M = load()\n"
            "    fig, ax = plt.subplots()\n"
            "    ax.bar([0, 1, 2], [M[f'val_accuracy_l2_{l2}'] for l2 in (0.0, 0.01, 0.1)])\n"
            "    ax.plot([1], [M[SHOWN]], 'o')\n"
            "    fig.savefig('fig_a.png', dpi=100)\n"
            "    plt.close(fig)\n"
            "except Exception as e:\n"
            "    print(e)\n"
            "try:\n"
            "    M = load()\n"
            "    fig, ax = plt.subplots()\n"
            "    ax.bar([0], [M['train_accuracy']])\n"
            "    fig.savefig('fig_b.png', dpi=100)\n"
            "    plt.close(fig)\n"
            "except Exception as e:\n"
            "    print(e)\n"
        )
        figures = [{"file": f, "caption": "A figure."} for f in ("fig_a.png", "fig_b.png")]
        return json.dumps({"script": script, "figures": figures})

    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: plotter(m, s, ctx, "plotting"))
    )
    result = aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    assert [f["file"] for f in result["figures"]] == ["fig_a.png", "fig_b.png"], result
    values = {
        rid: {
            m["name"]: m["value"] for m in json.loads(RunPaths(run).node(rid).metrics.read_text())["metrics"]
        }
        for rid in runs
    }
    names = list(values[nid])
    # the caption names the node and states one value of the gain (the seed-1 re-run's): checkable
    number = f"{values[runs[-1]]['l2_gain_over_no_l2']:.6g}"
    caption = f"Validation accuracy of {nid} per L2 strength; the largest gain is {number}."
    rec = _review(run, tmp_path, "fig_a.png", caption)
    user = _text(rec["messages"][-1])
    line = next(x for x in user.splitlines() if x.startswith(f"- {nid}: "))
    measured, _, reruns = line.split("; measured ", 1)[1].partition("; seed re-runs: ")
    shown = [n for n in names if f"{n}=" in measured]
    # the headline, what fig_a's block reads (an f-string's names, a constant it uses), the stated one
    used = [names[0], *extra[:3], "flipped_fit_rate", "l2_gain_over_no_l2"]
    assert shown == [n for n in names if n in used], (shown, line)
    assert "train_accuracy=" not in line  # only fig_b reads it
    more = len(names) - len(shown)
    assert more > 0 and re.search(rf"\(\+{more} more metrics? not plotted", measured), (more, line)
    for rid in runs:  # every shown value of the node and of each re-run, as measured
        part = measured if rid == nid else reruns.split(f"({rid}) ", 1)[1].split(";", 1)[0]
        for n in shown:
            assert f"{n}={values[rid][n]}" in part, (rid, n, part)
    # a figure whose caption names the node and nothing else: the headline and fig_b's one metric
    rec = _review(run, tmp_path, "fig_b.png", f"Training accuracy of {nid}.")
    line = next(x for x in _text(rec["messages"][-1]).splitlines() if x.startswith(f"- {nid}: "))
    measured = line.split("; measured ", 1)[1].split("; seed re-runs: ", 1)[0]
    assert [n for n in names if f"{n}=" in measured] == [names[0], "train_accuracy"], line
    # a script that plots every record of the file names no metric: what the figure shows cannot
    # be traced, so every metric of the node is shown (none counted as not plotted)
    generic = (
        "import json\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\n"
        f"rows = json.load(open({chosen_path[0]!r}))['metrics']\n"
        "ax.bar(range(len(rows)), [r['value'] for r in rows])\n"
        "fig.savefig('fig_c.png', dpi=100)\n"
    )
    answer = json.dumps({"script": generic, "figures": [{"file": "fig_c.png", "caption": "All."}]})
    llm = make_client(cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer))
    assert aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))["figures"]
    rec = _review(run, tmp_path, "fig_c.png", f"Every measurement of {nid}.")
    line = next(x for x in _text(rec["messages"][-1]).splitlines() if x.startswith(f"- {nid}: "))
    measured = line.split("; measured ", 1)[1].split("; seed re-runs: ", 1)[0]
    assert [n for n in names if f"{n}=" in measured] == names and "not plotted" not in line, line


@needs_latex(("pdflatex",))
def test_a_reflection_round_says_where_it_shows_the_figure_remarks_that_their_numbers_are_no_record(
    tmp_path: Path, run_copy
):
    # relay s8 ln2 043: the rule "a number only a figure reviewer's remark states is no record" was
    # said in the first writer call only, not in the reflection round that quotes the remarks (with
    # the reviewer's own differences: "+0.02 and +0.001", "differs by 0.0015"); it is said there now
    from ai_scientist.reporting.vlm import run_vlm
    from ai_scientist.reporting.writeup import ReportOptions, write_paper

    run = run_copy(tmp_path)
    paths = RunPaths(run)
    shown = [{"file": f"fig_{i}.png", "caption": f"Validation accuracy, condition {i}."} for i in (1, 2)]
    for i, fig in enumerate(shown):
        _plot_png(paths.figures / fig["file"], seed=21 + 5 * i)
    paths.figures_json.write_text(json.dumps({"figures": shown}))
    remark = "the two bars differ by 0.0137, within the seed noise"  # a number the reviewer worked out
    base = default_responder()

    def respond(messages, schema, ctx, role):
        if role == "vlm_feedback" and "caption_matches" in (schema or {}).get("properties", {}):
            review = {"description": "bars", "caption_matches": True, "issues": [remark]}
            return json.dumps({**review, "suggested_caption": "Bars.", "score": 6})
        if role == "writeup" and ctx.label != "sections" and not ctx.label.startswith("citation"):
            user = _text(messages[-1])
            line = user.split("Your current sections (JSON):\n", 1)[1].split("\n", 1)[0]
            return json.dumps(json.loads(line))  # later rounds: the sections unchanged
        return base(messages, schema, ctx, role)

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], writeup_reflections=1, compile_fix_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: respond(m, s, ctx, role_of(ctx)))
    )
    run_vlm(run, cfg, llm)
    reviews = json.loads(paths.vlm_json.read_text())["figures"]
    assert any(remark in (r.get("issues") or []) for r in reviews.values()), reviews
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    recs = [r for r in _records(run, before) if r["phase"] == "writeup"]
    first = _text(next(r for r in recs if r["label"] == "sections")["messages"][-1])
    rule = "A number only a figure reviewer's remark states is no record of the run"
    assert rule in first  # the first writer call's rule, word for word
    reflect = _text(next(r for r in recs if r["label"] == "reflect_1")["messages"][-1])
    lines = reflect.splitlines()
    quoted = [i for i, x in enumerate(lines) if "as the vision model saw it" in x and remark in x]
    assert quoted, reflect[:3000]
    # said right after the remarks it is about, in the round's problem list
    said = [i for i, x in enumerate(lines) if rule in x]
    assert max(quoted) + 1 in said, (said, quoted)
