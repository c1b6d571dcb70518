"""End to end: synthetic run -> figures -> VLM -> PDF -> reviews, with a scripted LLM."""

from __future__ import annotations

import json
import sys

import jsonschema
from components import needs_latex
from test_report_support import FakeS2, default_responder, make_run, real_client, report_cfg

from ai_scientist.base.fileio import read_jsonl
from ai_scientist.execution.subprocess_backend import SubprocessExecutor
from ai_scientist.reporting.pipeline import run_reporting
from ai_scientist.reporting.review import REVIEW_SCHEMA, check_review
from ai_scientist.reporting.writeup import ReportOptions

NEEDS_LATEX = needs_latex()


@NEEDS_LATEX
def test_full_reporting_pipeline(tmp_path):
    run = make_run(tmp_path)
    cfg = report_cfg(tmp_path)
    client, backend = real_client(run, cfg, default_responder())
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
    # best of each stage plus the two seed re-runs of stage 2's best; stage 4's best is n0006, kept
    # from stage 3 (the node its ablations ran against), listed once; the ablation n0007 is a good
    # node of stage 4 that bears on the idea (role stage_node)
    assert set(by_id) == {"n0001", "n0003", "n0004", "n0005", "n0006", "n0007"}
    assert {e["node_id"] for e in manifest["nodes"] if e["role"] == "stage_node"} == {"n0007"}
    assert by_id["n0004"]["seed"] == 1 and by_id["n0004"]["role"] == "seed_run"
    npy = next(f for f in by_id["n0003"]["files"] if f["path"].endswith("losses.npy"))
    assert npy["shape"] == [2, 20] and npy["dtype"] == "float64"
    vlm = json.loads((run / "figures" / "vlm.json").read_text())
    assert "loss_all.png" in vlm["figures"] and "n0006" in vlm["nodes"]
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
    logs = [json.loads(p.read_text()) for p in sorted(run.glob("nodes/*/prompt_logs/*_*.json"))]
    ours = [r for r in logs if r["phase"] in ("plots", "vlm", "writeup", "review")]
    assert len(ours) == backend.calls
    roles = [r["role"] for r in ours]
    assert roles.count("review") == 5  # 2 reviewers x (review + 1 reflection) + meta-review
    assert {"plotting", "vlm_feedback", "citation", "writeup"} <= set(roles)
    assert {r["node_id"] for r in ours if r["phase"] == "vlm"} == {"run", "n0001", "n0003", "n0006"}
    assert all("s2-secret-key-123" not in json.dumps(r) for r in logs)
    cost = json.loads((run / "cost.json").read_text())
    assert "review" in json.dumps(cost)
    steps = [e for e in read_jsonl(run / "events.jsonl") if e["type"] == "report_step"]
    # issue 32: the claims check follows the writeup (paper/claims.json)
    assert [e["step"] for e in steps] == ["preflight", "plots", "vlm", "writeup", "claims", "review"]
