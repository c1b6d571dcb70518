"""Issue 32: the facts writer. With ``report.writer=facts`` the pipeline writes the paper from the
run's records: the compiled PDF holds the run's best metric with its seed mean ± s.e. and a table
per stage whose numbers equal the journal's and the events' (derived here from those files, not
from anything the writer wrote), every number of it has a source in ``paper/claims.json``, and the
first page says the pipeline wrote it. No writer call is made."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import events, journal_nodes, prompt_records, start_run

from ai_scientist.base.config import validate
from ai_scientist.reporting.facts import fmt_stderr, fmt_value, resolve_writer
from ai_scientist.treesearch.best import counts_by_stage
from ai_scientist.treesearch.node import Node


def _needs_tools() -> None:
    latex_or_skip()
    latex_or_skip(("pdftotext",))
    matplotlib_or_skip()


def pdf_text(pdf: Path, *pages: int) -> str:
    """The PDF's text (``pdftotext -layout``), typographic quotes made plain."""
    span = ["-f", str(pages[0]), "-l", str(pages[-1])] if pages else []
    done = subprocess.run(["pdftotext", "-layout", *span, str(pdf), "-"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.replace("\u2019", "'").replace("\u2013", "-")


def flat(text: str) -> str:
    return " ".join(text.split())


def expected_from_records(run_dir: Path) -> dict:
    """Each stage's counts, best node, its metric and its seed statistic, read from journal.jsonl
    (latest record per node; counts by treesearch.best) and events.jsonl (stage_best), the seed
    statistic computed here from the re-runs' metrics in the journal."""
    nodes = journal_nodes(run_dir)
    counts = counts_by_stage(Node.from_dict(n) for n in nodes.values())
    best = {e["stage"]: e["node_id"] for e in events(run_dir) if e["type"] == "stage_best"}
    out = {}
    for stage, c in counts.items():
        bid = best.get(stage)
        seeds = [
            n["metric"]["value"]
            for n in nodes.values()
            if n["operation"] == "seed_eval" and n["parent_id"] == bid and n["status"] == "good"
        ]
        mean = sum(seeds) / len(seeds) if seeds else None
        se = (
            math.sqrt(sum((v - mean) ** 2 for v in seeds) / (len(seeds) - 1)) / math.sqrt(len(seeds))
            if len(seeds) > 1
            else None
        )
        search = [n for n in nodes.values() if n["stage"] == stage and n["operation"] != "seed_eval"]
        out[stage] = {
            "counts": c,
            "best": bid,
            "value": nodes[bid]["metric"]["value"] if bid else None,
            "mean": mean,
            "se": se,
            "n_seeds": len(seeds),
            "search": search,
        }
    return out


@pytest.mark.slow
def test_facts_writer_paper_states_the_runs_measurements(tmp_path, capsys):
    _needs_tools()
    code, run_dir, responder = start_run(
        tmp_path,
        "report.enabled=true",
        "report.writer=facts",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        "agent.plots.critique=false",
    )
    assert code == 0
    steps = {e["step"]: e for e in events(run_dir) if e["type"] == "report_step"}
    assert steps["writeup"]["status"] == "ok", steps["writeup"]
    assert steps["writeup"]["result"]["writer"] == "facts"
    assert steps["claims"]["status"] == "ok", steps["claims"]
    assert [e["writer"] for e in events(run_dir) if e["type"] == "report_writer"] == ["facts"]
    # the method names the model that wrote the code as its calls recorded it (the embedded backend
    # answers as local:<file> whatever llm.model says)
    code_log = next(r for r in prompt_records(run_dir) if r["role"] == "code")
    tex = (run_dir / "paper" / "paper.tex").read_text()
    assert code_log["model"] in tex
    # the pipeline wrote it: no writer or citation call was made
    assert not [c for c in responder.calls if c[1] == "writeup"], responder.calls

    pdf = run_dir / "paper" / "paper.pdf"
    text = flat(pdf_text(pdf))
    first = flat(pdf_text(pdf, 1))
    assert "written by the AI Scientist pipeline from the run's records, not by a language model" in first

    want = expected_from_records(run_dir)
    final = want[max(s for s in want if want[s]["best"])]
    assert final["n_seeds"] >= 2
    best_sentence = (
        f"{final['best']}, the best node at the end of stage {max(want)}, reached val_accuracy = "
        f"{fmt_value(final['value'])}"
    )
    assert best_sentence in first, first
    seed_text = f"over its {final['n_seeds']} seed re-runs"
    stat = f"{fmt_value(final['mean'])} ± {fmt_stderr(final['se'])} (mean ± s.e.)"
    assert seed_text in first and stat in first, first
    assert stat in text.split("5 Results", 1)[1]  # and in the results section

    # a table per stage: its counts, its best with the seed statistic, and a row per search node
    # with the node's metric as the journal has it (or its failure)
    layout = pdf_text(pdf)
    for stage, w in want.items():
        c = w["counts"]
        nodes_word = "node" if c.nodes == 1 else "nodes"
        head = f"Stage {stage} ("
        caption = f"{c.nodes} {nodes_word} tried, {c.good} worked, {c.buggy} failed"
        assert re.search(rf"Table \d+: {re.escape(head)}[^)]*\): {re.escape(caption)}", text), (
            stage,
            caption,
        )
        if c.seed_runs:
            assert f"{caption}; {c.seed_runs} seed re-runs ({c.seed_good} worked)" in text
        if w["mean"] is not None:
            assert f"Best: {w['best']}" in text
        for n in w["search"]:
            if n["status"] == "good":
                row = rf"{n['id']}\s+{n['operation']}\s+{n['parent_id'] or '-'}\s+{re.escape(fmt_value(n['metric']['value']))}"
            else:
                row = rf"{n['id']}\s+{n['operation']}\s+\S+\s+-\s+{n['status']}:"
            assert re.search(row, layout), (n["id"], row)

    # every number of the paper has a source; none is unmatched
    claims = json.loads((run_dir / "paper" / "claims.json").read_text())
    assert claims["writer"] == "facts"
    assert claims["numbers"] >= 20 and claims["unmatched"] == 0, claims["unmatched_numbers"]
    assert all(c["source"] for c in claims["claims"])
    by_text = {c["text"]: c for c in claims["claims"]}
    assert by_text[fmt_value(final["mean"])]["kind"] in ("seed statistic", "metric")
    assert by_text[fmt_stderr(final["se"])]["kind"] == "seed statistic"

    # the run's last lines: who wrote the paper, and the claims
    err = capsys.readouterr().err
    assert "  written by: the pipeline, from the run's records" in err
    assert f"  claims: {claims['numbers']} numbers in the paper, 0 unmatched by any measurement" in err


def test_auto_resolves_by_the_writer_backend():
    cfg = validate({})
    local = SimpleNamespace(backend=SimpleNamespace(name="local"))
    remote = SimpleNamespace(backend=SimpleNamespace(name="openai"))
    assert resolve_writer(cfg, local)[0] == "facts"
    assert resolve_writer(cfg, remote)[0] == "model"
    assert resolve_writer(cfg, object())[0] == "model"  # a test double without a backend
    forced = validate({"report": {"writer": "model"}})
    assert resolve_writer(forced, local) == ("model", "report.writer=model")
    assert resolve_writer(validate({"report": {"writer": "facts"}}), remote)[0] == "facts"
