"""End to end: a scripted run the pipeline wrote -> figures -> VLM -> PDF -> reviews, with a scripted LLM."""

from __future__ import annotations

import json
import sys

import jsonschema
from components import needs_latex
from pipeline_support import journal_nodes
from test_report_support import FakeS2, default_responder, real_client, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.execution.subprocess_backend import SubprocessExecutor
from ai_scientist.reporting.pipeline import run_reporting
from ai_scientist.reporting.review import REVIEW_SCHEMA, check_review
from ai_scientist.reporting.writeup import ReportOptions

NEEDS_LATEX = needs_latex()


@NEEDS_LATEX
def test_full_reporting_pipeline(tmp_path, run_copy):
    run = run_copy(tmp_path)
    cfg = report_cfg(tmp_path)
    client, backend = real_client(run, cfg, default_responder())
    searched = set(run.glob("nodes/*/prompt_logs/*_*.json"))  # the search's own calls
    s2 = FakeS2()
    try:
        out = run_reporting(
            run, cfg, client, SubprocessExecutor(python=sys.executable),
            memory_digest="- linear warm-up beat constant LR in 3 of 4 stages",
            options=ReportOptions(s2_base_url=s2.url, environ={"S2_API_KEY": "s2-secret-key-123"}),
        )  # fmt: skip
    finally:
        s2.close()
    assert {k: v["status"] for k, v in out.items()} == {
        "plots": "ok", "vlm": "ok", "writeup": "ok", "review": "ok"
    }, out  # fmt: skip
    figures = json.loads((run / "figures" / "figures.json").read_text())
    assert [f["file"] for f in figures["figures"]] == ["loss_all.png"]
    manifest = json.loads((run / "figures" / "manifest.json").read_text())
    by_id = {e["node_id"]: e for e in manifest["nodes"]}
    # from the run's records: each stage's best (listed once when kept from an earlier stage),
    # the good seed re-runs of a best, then other good nodes of a stage (role stage_node)
    nodes = journal_nodes(run)
    stages = json.loads((run / "state.json").read_text())["stages"]
    best = {v["best"]["node_id"] for v in stages.values()}
    seed_runs = {n for n, v in nodes.items() if v["operation"] == "seed_eval" and v["parent_id"] in best}
    seed_runs = {n for n in seed_runs if nodes[n]["status"] == "good"}
    assert best and seed_runs
    assert {n for n, e in by_id.items() if e["role"] == "best"} == best
    # every listed node's good seed re-runs too, each naming the node it re-ran (issue 28)
    reruns = {n for n, e in by_id.items() if e["role"] == "seed_run"}
    assert seed_runs <= reruns
    assert all(by_id[n]["seed"] == nodes[n]["seed"] for n in reruns)
    assert all(
        by_id[n]["seed_of"] == nodes[n]["parent_id"] and nodes[n]["parent_id"] in by_id for n in reruns
    )
    others = {n for n, e in by_id.items() if e["role"] == "stage_node"}
    assert all(nodes[n]["status"] == "good" and nodes[n]["operation"] != "seed_eval" for n in others)
    assert set(by_id) == best | reruns | others
    for nid in best:  # the data files its program saved, copied for the figure script
        saved = {
            p.relative_to(run / "nodes" / nid / "workspace").as_posix()
            for p in (run / "nodes" / nid / "workspace").glob("*.json")
        }
        assert saved and {f"data/{nid}/{name}" for name in saved} <= {f["path"] for f in by_id[nid]["files"]}
    vlm = json.loads((run / "figures" / "vlm.json").read_text())
    # the search critiqued its nodes' figures; the report reuses those and reviews its own figure
    own = {p.parent.name for p in run.glob("nodes/*/vlm.json") if json.loads(p.read_text()).get("critique")}
    assert "loss_all.png" in vlm["figures"] and set(vlm["nodes"]) == own and own
    pdf = run / "paper" / "paper.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    writeup = json.loads((run / "paper" / "writeup.json").read_text())
    # the figure floated to page 2, which counts as main text
    assert writeup["pages"] == 2 and writeup["main_pages"] == 2 and not writeup["over_page_limit"]
    assert writeup["references"] == ["liu2019warm"]
    # the VLM's suggested caption replaced the one it judged wrong
    assert writeup["figures"][0]["caption"].startswith("Validation loss per node")
    tex = (run / "paper" / "paper.tex").read_text()
    assert r"~\cite{liu2019warm}" in tex and r"~\ref{fig:1}" in tex and r"$\alpha = 0.1$" in tex
    assert r"\input{/etc" not in tex and r"\textbackslash{}input" in tex
    assert "s2-secret-key-123" not in tex
    review = json.loads((run / "review.json").read_text())
    assert len(review["reviews"]) == 2 and check_review(review["meta_review"]) == []
    assert all(check_review(r) == [] for r in review["reviews"])
    assert "loss_all.png" in review["figure_review"]["figures"]
    assert jsonschema.Draft202012Validator(REVIEW_SCHEMA).is_valid(review["meta_review"])
    # every call went through the client: one prompt log each, under the node or "run"
    paths = sorted(run.glob("nodes/*/prompt_logs/*_*.json"))
    logs = [json.loads(p.read_text()) for p in paths]
    ours = [json.loads(p.read_text()) for p in paths if p not in searched]
    assert {r["phase"] for r in ours} <= {"plots", "vlm", "writeup", "review"}
    assert len(ours) == backend.calls
    roles = [r["role"] for r in ours]
    assert roles.count("review") == 5  # 2 reviewers x (review + 1 reflection) + meta-review
    assert {"plotting", "vlm_feedback", "citation", "writeup"} <= set(roles)
    assert {r["node_id"] for r in ours if r["phase"] == "vlm"} == {"run"}  # the nodes' critiques: reused
    assert all("s2-secret-key-123" not in json.dumps(r) for r in logs)
    cost = json.loads((run / "cost.json").read_text())
    assert "review" in json.dumps(cost)
    steps = [e for e in read_jsonl(run / "events.jsonl") if e["type"] == "report_step"]
    # issue 32: the claims check follows the writeup (paper/claims.json)
    assert [e["step"] for e in steps] == ["preflight", "plots", "vlm", "writeup", "claims", "review"]
