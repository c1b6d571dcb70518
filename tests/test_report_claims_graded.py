"""Issue 30 items 1 and 4 together: with a grader, the paper's numbers are matched against the
graded metrics first; a number that states only what a program reported about itself (0.987,
which the grader did not confirm) is ``self-reported metric`` in ``paper/claims.json``, goes back
to the writer with the graded value, is shown to the reviewers with the graded/self-reported
mismatches, and is counted in the run's last lines.

Expectations come from the run's records (each node's ``grade.json``, ``paper/claims.json``) and
the prompt logs of the calls really sent."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest
from ai_scientist_testing.scripted import PAPER_SECTIONS, ExampleResponder
from components import latex_or_skip, matplotlib_or_skip
from pipeline_support import ROOT, run_args

from ai_scientist.cli.commands import execute, setup_run
from ai_scientist.llm.scripted_backend import ScriptedBackend

LABELS = [1, 0, 1, 1, 0, 0, 1, 0]
CLAIM = 0.987  # what every program says of itself; the grader measures 0.5
GRADE_PY = """\
import json, pathlib
labels = pathlib.Path("grader/labels.txt").read_text().split()
preds = pathlib.Path("submission/predictions.txt").read_text().split()
acc = sum(a == b for a, b in zip(labels, preds)) / len(labels)
pathlib.Path("metrics.json").write_text(json.dumps(
    {"metrics": [{"name": "accuracy", "value": acc, "direction": "maximize"}]}))
"""
PROGRAM = f"""\
import json, pathlib
labels = {LABELS!r}
pathlib.Path("predictions.txt").write_text(" ".join(str(1 - y if i < 4 else y) for i, y in enumerate(labels)))
pathlib.Path("metrics.json").write_text(json.dumps(
    {{"metrics": [{{"name": "accuracy", "value": {CLAIM}, "direction": "maximize"}}]}}))
print("accuracy", {CLAIM})
"""


class ClaimingResponder(ExampleResponder):
    """Every program claims 0.987 with half its predictions wrong; the writer prints the claim."""

    def __init__(self):
        super().__init__(buggy_nodes=())

    def _phase2(self, text, ctx):
        answer = json.loads(super()._phase2(text, ctx))
        answer["files"] = [{"path": "experiment.py", "content": PROGRAM, "encoding": "utf-8"}]
        return json.dumps(answer)

    def _writeup(self, text, ctx):
        if "citation" in ctx.label:
            return super()._writeup(text, ctx)
        return json.dumps({**PAPER_SECTIONS, "results": f"The classifier reaches an accuracy of {CLAIM}."})


@pytest.fixture
def grader_dir():
    """A world-readable grader directory outside /tmp (the grader runs unprivileged)."""
    base = ROOT / "test-artifacts" / f"grader-{uuid.uuid4().hex[:8]}"
    task = base / "task"
    task.mkdir(parents=True)
    for d in (base.parent, base, task):
        d.chmod(0o755)
    (task / "labels.txt").write_text(" ".join(map(str, LABELS)) + "\n")
    (task / "grade.py").write_text(GRADE_PY)
    for f in task.iterdir():
        f.chmod(0o644)
    yield task
    shutil.rmtree(base, ignore_errors=True)


def _prompt_text(record: dict) -> str:
    parts = [[m["content"]] if isinstance(m["content"], str) else m["content"] for m in record["messages"]]
    return "\n".join(p if isinstance(p, str) else p.get("text", "") for ps in parts for p in ps)


def test_a_number_only_a_program_claimed_is_sent_back_shown_and_counted(tmp_path, grader_dir, capsys):
    latex_or_skip()
    matplotlib_or_skip()
    args = run_args(
        tmp_path,
        "report.enabled=true",
        "report.citations.enabled=false",
        "report.num_reviews=1",
        "agent.stages.stage2_max_iters=1",
        "agent.stages.stage3_max_iters=1",
        "agent.stages.stage4_max_iters=1",
        "agent.multi_seed_eval.num_seeds=1",
        "agent.plots.critique=false",
    )
    args.grader = str(grader_dir)
    run, resources = setup_run(args)
    assert execute(run, resources=resources, backend=ScriptedBackend(ClaimingResponder())) == 0
    grades = {p.parent.name: json.loads(p.read_text()) for p in (run.dir / "nodes").glob("*/grade.json")}
    assert grades and all(g["self_reported"][0]["value"] == CLAIM for g in grades.values())
    claims = json.loads((run.dir / "paper" / "claims.json").read_text())
    (row,) = [c for c in claims["claims"] if c["text"] == str(CLAIM)]
    assert row["kind"] == "self-reported metric" and row["source"].endswith(", self-reported")
    assert claims["self_reported_numbers"] == [str(CLAIM)] and claims["unmatched"] == 0
    node = row["source"].split()[0]
    graded = grades[node]["graded"][0]["value"]
    assert {"value": graded, "source": f"{node} accuracy", "kind": "graded metric"} in row["nearest"]
    logs = {
        p.stem.split("_", 1)[1]: json.loads(p.read_text())
        for p in (run.dir / "nodes" / "run" / "prompt_logs").glob("*.json")
    }
    reflect = logs["writeup_reflect_1"]["messages"][-1]["content"]
    assert f'  - "{CLAIM}" in "... {row["context"]} ...": {row["source"]}; measured: ' in reflect
    assert f"{node} accuracy = {graded:.6g}" in reflect and "Report the graded value instead." in reflect
    writeup = json.loads((run.dir / "paper" / "writeup.json").read_text())
    assert writeup["reflections"][0]["self_reported"] == [str(CLAIM)]
    review = _prompt_text(logs["review_review_1"])
    assert f'- "{CLAIM}" in "... {row["context"]} ...": {row["source"]}' in review
    for nid, g in grades.items():  # every mismatch the grader recorded is shown to the reviewer
        for m in g["mismatches"]:
            line = f"- {nid} {m['name']}: graded {m['graded']:.6g}, its program reported {m['self_reported']:.6g}."
            assert line in review
    err = capsys.readouterr().err
    assert f"; 1 only self-reported (not graded): {CLAIM}" in err
