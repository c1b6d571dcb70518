"""Issue 28, relay run s10 ln (session 10, report side, second part): what the report's calls are
told of the run's seeds, of chktex's warnings, of a previous figure review, of round 1's citation
queries, of one SEED's draw and of a benchmark's matrices against the caches. Every expectation is
read from what a scripted report really sent (its prompt logs) and the files the run wrote (the
journal, the resolved config, paper.tex, chktex's output)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import test_relay_s10_hpc
import test_relay_s10_noise
import yaml
from components import needs_latex
from test_report_support import SECTIONS, default_responder, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.base.paths import RunPaths
from ai_scientist.llm.factory import make_client
from ai_scientist.llm.scripted_backend import ScriptedBackend

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "examples" / "label_noise" / "references.bib"
CONFIG_NAME = re.compile(r"\b(?:agent|exec|report|llm)\.[a-z_]+")  # a config key's dotted name


def _text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if isinstance(content, list):
        return "\n\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    return str(content)


def _logs(run: Path) -> set[Path]:
    return set((run / "nodes").glob("*/prompt_logs/*.json"))


def _records(run: Path, before: set[Path]) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(_logs(run) - before)]


def _run_seeds(run: Path) -> tuple[int, list[int]]:
    """(the search runs' SEED as the run's resolved config holds it, the re-runs' SEEDs as its
    journal holds them)."""
    cfg = yaml.safe_load(RunPaths(run).config.read_text())
    reruns = {
        int(r["node"]["seed"])
        for r in read_jsonl(RunPaths(run).journal)
        if isinstance(r.get("node"), dict) and r["node"].get("operation") == "seed_eval"
    }
    return int(cfg["agent"]["seed"]), sorted(reruns)


def test_the_report_calls_are_told_the_seeds_the_run_used_not_a_config_key(tmp_path: Path, run_copy):
    # relay s10 ln 033: the aggregate plotter's system message said the seed statistic is over
    # "seeds agent.seed+1 .. agent.seed+N", a config key the model never sees; it now names the
    # SEED values of the run's re-runs and of its search runs
    from ai_scientist.execution.subprocess_backend import SubprocessExecutor
    from ai_scientist.reporting.aggregate import aggregate_plots
    from ai_scientist.reporting.errors import StepFailed

    run = run_copy(tmp_path)
    search, reruns = _run_seeds(run)
    assert reruns
    answer = default_responder()
    cfg = report_cfg(tmp_path, plot_reflection_rounds=0)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "plotting"))
    )
    try:  # the plotting call is what is checked, whether its script then ran or not
        aggregate_plots(run, cfg, llm, SubprocessExecutor(python=sys.executable))
    except StepFailed:
        pass
    recs = _records(run, before)
    assert recs
    for rec in recs:
        text = "\n".join(_text(m) for m in rec["messages"])
        assert not CONFIG_NAME.findall(text), CONFIG_NAME.findall(text)
        line = next(x for x in text.splitlines() if "seed re-runs only" in x)
        said = re.search(r"seed re-runs only \(SEED ([\d, ]+)\)", line)
        assert said and [int(s) for s in said.group(1).split(",")] == reruns, line
        assert f"search run (SEED {search})" in line, line


def _write(run: Path, tmp_path: Path, respond: Any, **report: Any) -> list[dict[str, Any]]:
    from ai_scientist.reporting.writeup import ReportOptions, write_paper

    cfg = report_cfg(tmp_path, references=[str(LIBRARY)], **report)
    before = _logs(run)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    write_paper(run, cfg, llm, options=ReportOptions(environ={}))
    return _records(run, before)


@needs_latex(("pdflatex", "chktex"))
def test_the_writer_is_not_told_chktex_spacing_hints_its_allowed_text_cannot_follow(tmp_path: Path, run_copy):
    # relay s10 ln 043: the writer was told "Interword spacing should perhaps be used" for "et al.",
    # which only "\ " or "~" fixes, and the escaping prints both as characters; such hints are
    # left out, a warning its text can act on (straight quotes) still reaches it
    run = run_copy(tmp_path)
    results = (
        "Earlier work (Zhang et al. on noisy labels) trained with plain SGD. The "
        '"reference" model is the unregularised one; see Figure \\ref{fig:1}.'
    )
    written = dict(SECTIONS, results=results)

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return json.dumps(written)

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0, writeup_reflections=1)
    warnings = json.loads((RunPaths(run).paper / "writeup.json").read_text())["chktex_warnings"]
    tex = (RunPaths(run).paper / "paper.tex").read_text(encoding="utf-8").splitlines()
    ours = {i for i, x in enumerate(tex, 1) if "Zhang et al." in x}
    spacing = [w for w in warnings if int(w.split(":")[1]) in ours and w.split(":")[3] in ("12", "13")]
    assert spacing, warnings  # chktex did warn of the spacing on the writer's own line
    user = _text(next(r for r in recs if r["label"] == "reflect_1")["messages"][-1])
    line = next(x for x in user.splitlines() if "LaTeX style warnings (chktex) in your text:" in x)
    for w in spacing:
        assert w.split(":", 4)[4].strip().rstrip(".") not in line, line
    assert "alternative to `\"'" in line, line  # its straight quotes: its own, still reported


mm_run = test_relay_s10_hpc.mm_run  # the fixture: a scripted run of the blocked matmul idea


def test_a_benchmarks_figure_review_sets_the_ideas_matrix_sizes_against_the_caches(mm_run, tmp_path: Path):
    # M14's note on relay s10 mm: the node critique's machine block now sets the idea's matrix
    # sizes against the caches (machine_text's idea); the report's figure review of a benchmark
    # gave the machine without them, so an "out of cache" caption could not be checked
    import shutil

    from ai_scientist.reporting.vlm import review_figures

    run = Path(shutil.copytree(mm_run, tmp_path / "run", ignore=shutil.ignore_patterns("run.lock")))
    idea = (run / "idea.md").read_text()
    env = json.loads(RunPaths(run).environment.read_text())
    caches = ((env.get("sandbox") or {}).get("cpu") or {}).get("caches") or (env.get("cpu") or {}).get(
        "caches"
    )
    if not caches:
        pytest.skip("this machine reports no caches")
    data = sorted((c["bytes"], name) for name, c in caches.items() if not name.endswith("i"))
    sizes = sorted(
        {int(x) for m in re.findall(r"\bn\s*=\s*([\d, and]+\d)", idea) for x in re.findall(r"\d+", m)}
    )
    assert sizes, idea
    plot = next(iter(sorted((run / "nodes").glob("*/plots/*.png"))))  # a figure of the run's own
    RunPaths(run).figures.mkdir(parents=True, exist_ok=True)
    shutil.copy(plot, RunPaths(run).figures / "timings.png")
    answer = default_responder()
    cfg = report_cfg(tmp_path)
    before = _logs(run)
    llm = make_client(
        cfg, run, None, backend=ScriptedBackend(lambda m, s, ctx: answer(m, s, ctx, "vlm_feedback"))
    )
    review_figures(
        run, cfg, llm, [{"file": "timings.png", "caption": "Blocked kernel timings."}], phase="review"
    )
    (rec,) = _records(run, before)
    text = "\n".join(_text(m) for m in rec["messages"])
    assert "The machine the experiments ran on" in text, text[:2000]
    test_relay_s10_hpc._check_working_sets(text, sizes, data)


seeded_run = test_relay_s10_noise.run  # the fixture: a run whose data one SEED draws (bayes_val_accuracy)


@needs_latex(("pdflatex",))
def test_the_writer_is_told_what_one_seed_draws_once_beside_the_seed_noise(seeded_run, tmp_path: Path):
    # N10's note: the search prompts give beside their seed noise band what one SEED draws (a
    # metric alike for two methods on one SEED); the writer's "Seed noise at this stage's end" line
    # did not, so a paper could read the band as a bound on within-run differences
    import shutil

    run = Path(shutil.copytree(seeded_run, tmp_path / "run", ignore=shutil.ignore_patterns("run.lock")))
    nodes = test_relay_s10_noise.journal_nodes(run)
    search = int(yaml.safe_load(RunPaths(run).config.read_text())["agent"]["seed"])
    drawn = test_relay_s10_noise._drawn(run, nodes, search, 99)
    assert drawn is not None  # the run's records show what one SEED draws
    name, per_seed = drawn

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps({"queries": ["label noise regularisation"]})
        return json.dumps(SECTIONS)

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0)
    write = next(r for r in recs if not r["label"].startswith("citation"))
    text = "\n".join(_text(m) for m in write["messages"])
    assert text.count("one SEED draws new data here") == 1, text.count("one SEED draws new data here")
    line = next(x for x in text.splitlines() if "one SEED draws new data here" in x)
    assert line.startswith("Seed noise at this stage's end: sigma "), line  # beside the band
    said = line[line.index("one SEED draws new data here") :]
    assert said.startswith(f"one SEED draws new data here ({name}"), said
    values, seeds = re.search(r"headlines differ: ([\d., ]+) on SEED ([\d, ]+)\)", said).groups()
    for value, seed in zip(values.split(", "), seeds.split(", "), strict=True):
        assert abs(float(value) - per_seed[int(seed)]) < 5e-4, (seed, value, per_seed)
    assert "a paired difference within one run" in said
    # and the seed statistic with the run's SEED values, no config key (relay s10 ln 033)
    reruns = _run_seeds(run)[1]
    assert (
        f"seed re-runs only (SEED {', '.join(map(str, reruns))}); the node's own search run (SEED {search})"
        in text
    )
    assert "agent.seed" not in text


def test_the_second_citation_round_is_told_what_each_query_found(tmp_path: Path, run_copy):
    # relay s10 ln 041: round 2 got the references found as titles and years only, so the model
    # could not tell which of round 1's queries had failed (nothing on Polyak averaging came back);
    # each query is now listed with what it found, or "nothing"
    from ai_scientist.literature.cascade import build
    from ai_scientist.reporting.writeup import ReportOptions

    run = run_copy(tmp_path)
    first = ["learning with noisy labels", "memorization in deep networks", "quasar polyak zzqx averaging"]

    def respond(messages, schema, ctx):
        if ctx.label.startswith("citation"):
            return json.dumps(
                {"queries": first if "Propose the search queries" in _text(messages[-1]) else []}
            )
        return json.dumps(SECTIONS)

    recs = _write(run, tmp_path, respond, compile_fix_rounds=0)
    calls = [r for r in recs if r["label"].startswith("citation")]
    assert len(calls) == 2, [r["label"] for r in calls]
    user = _text(calls[1]["messages"][-1])
    # what each query finds in the run's sources, the first query to find a paper owning it
    cfg = report_cfg(tmp_path, references=[str(LIBRARY)])
    cascade = build(cfg, RunPaths(run).s2_cache, ReportOptions(environ={}).machine())
    owned: set[str] = set()
    bib = (RunPaths(run).paper / "references.bib").read_text()
    for q in first:
        results = [str(p.get("title")) for p in cascade.search(q, cfg.report.citations.max_results)]
        new = [t for t in results if t not in owned]
        owned |= set(results)
        line = next(x for x in user.splitlines() if x.startswith(f'- "{q}": '))
        if not results:
            assert line == f'- "{q}": nothing', line
            continue
        if not new:  # its papers were another query's: said so, with how many it returned
            assert (
                line
                == f'- "{q}": nothing new (its {len(results)} result{"s" if len(results) != 1 else ""} found by an earlier query)'
            ), line
            continue
        for t in new:
            assert t in line and t in bib, (t, line)
        assert len(line.split("; ")) == len(new), line
    assert any(x.endswith(": nothing") for x in user.splitlines()), user
    assert "References found so far" not in user  # not a second, unattributed list


def test_a_figure_re_review_gives_each_earlier_issue_whole_on_its_own_line(tmp_path: Path, run_copy):
    # relay s10 ln 046: the re-review of a revised caption quoted the earlier review's issues joined
    # with "; " into one line of ~1,900 characters ("..no information.."), which the critic saw cut
    # mid-word ("the vis"); each issue is now given whole on its own line
    import shutil

    from ai_scientist.reporting.vlm import review_figures

    run = run_copy(tmp_path)
    png = sorted(run.glob("nodes/*/plots/*.png"))[0]
    RunPaths(run).figures.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(png, RunPaths(run).figures / "headline.png")
    # a capable reviewer's issues: long sentences, each ending with a full stop (the idea's own)
    idea = " ".join(RunPaths(run).idea_md.read_text().split())
    sentences = [x for x in re.split(r"(?<=\.) ", idea) if len(x) > 80 and x.endswith(".")][:8]

    def respond(messages, schema, ctx):
        return json.dumps(
            {
                "description": "validation accuracy per node",
                "caption_matches": False,
                "issues": [f"The caption leaves out: {x}" for x in sentences],
                "suggested_caption": "Validation accuracy per node.",
                "score": 6,
            }
        )

    cfg = report_cfg(tmp_path)
    llm = make_client(cfg, run, None, backend=ScriptedBackend(respond))
    before = _logs(run)
    for caption in ("Accuracy per node.", "Validation accuracy of each stage's best node."):
        review_figures(run, cfg, llm, [{"file": "headline.png", "caption": caption}], phase="review")
    first, second = _records(run, before)
    issues = json.loads(first["response"]["raw"])["issues"]
    assert len(" ; ".join(issues)) > 1000  # long enough that one line of them is a long line
    lines = _text(second["messages"][-1]).splitlines()
    for issue in issues:
        assert f"- {issue}" in lines, issue  # whole, on its own line
    said = next(x for x in lines if x.startswith("Reviewed before"))
    assert not any(i in said for i in issues) and ".." not in said, said
